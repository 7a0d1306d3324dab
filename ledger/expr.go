package ledger

import (
	"bytes"
	"cmp"
	"math/big"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The conditions and updates of the state machine (machine.go) are written as small typed trees,
// not as strings, so that one definition serves three readers: DynamoDB (render, once per ledger),
// the worker's prefilter (holds, on a scanned item), and the settling of unknown outcomes
// (applied, on a row read back). Attribute names and values are symbols: a ledger maps the names to
// its attribute names (a prefix, or the table ledger's plain names), and each write supplies the
// values.

// attr is a symbolic attribute name; its placeholder is "#" + the name.
type attr string

// The state attributes, plus the names a ledger may add (the table ledger's row identity, the
// inline ledger's existence test, the attributes removed when an item is finished).
const (
	aStatus     attr = "status"
	aOwner      attr = "owner"
	aSlot       attr = "slot"
	aToken      attr = "token"
	aScope      attr = "scope"
	aClaim      attr = "claim"
	aClaimUntil attr = "claimUntil"
	aAttempts   attr = "attempts"
	aRetryAt    attr = "retryAt"
	aError      attr = "error"
	aDoneAt     attr = "doneAt"
	aFailedAt   attr = "failedAt"
	aLastError  attr = "lastError"
	aRedriven   attr = "redrivenAt"
	aVersion    attr = "version" // the content version handled last (WithVersions)
	aExists     attr = "exists"  // the inline ledger's partition key: every write needs the item
	aJob        attr = "job"     // the table ledger's row identity (shape.ident)
	aSource     attr = "source"
	aItemKey    attr = "itemKey"
)

// val is a symbolic value; its placeholder is ":" + the name.
type val string

// The values the transitions use. The status values are constants; the rest come with each write.
const (
	vClaimed  val = "claimed"
	vRetry    val = "retry"
	vDone     val = "done"
	vFailed   val = "failed"
	vOwner    val = "owner"
	vSlot     val = "slot"
	vToken    val = "token"
	vScope    val = "scope"
	vClaim    val = "claim"
	vNow      val = "now"
	vUntil    val = "until"
	vRetryAt  val = "retryAt"
	vError    val = "error"
	vOne      val = "one"
	vMinusOne val = "minusOne"
	vNone     val = "none"
	vZero     val = "zero"
	vVersion  val = "version" // the content version a write records (Claim.Version)
	vPrev     val = "prev"    // the claim id a renew found (OpRenew), or a complete-only write's caller saw (versions)
	vJob      val = "job"
	vSource   val = "source"
	vItemKey  val = "itemKey"
)

// cond is a condition expression.
type cond interface {
	render(b *strings.Builder)
	// holds evaluates the condition as DynamoDB does: a comparison with a missing attribute (or
	// value) is false, attribute_not_exists of it true.
	holds(row row) bool
	// uses lists the attributes and values the condition names.
	uses(u *usage)
}

// row is what a condition is evaluated on: an item's attributes under the ledger's names, and
// the values of one write.
type row struct {
	attrs map[string]types.AttributeValue
	names map[attr]string
	vals  values
}

func (r row) get(a attr) types.AttributeValue { return r.attrs[r.names[a]] }

// val is the value of v in this write (a constant when the write does not give it).
func (r row) val(v val) types.AttributeValue { return r.vals.get(v) }

type usage struct {
	attrs map[attr]bool
	vals  map[val]bool
}

func (u *usage) attr(a attr) { u.attrs[a] = true }
func (u *usage) val(v val)   { u.vals[v] = true }

type (
	notExists struct{ a attr }
	exists    struct{ a attr }
	cmpOp     struct {
		a  attr
		op string // "=", "<", "<=", ">"
		v  val
	}
	inSet struct {
		a  attr
		vs []val
	}
	andOf []cond
	orOf  []cond
	notOf struct{ c cond }
)

func missing(a attr) cond       { return notExists{a} }
func present(a attr) cond       { return exists{a} }
func eq(a attr, v val) cond     { return cmpOp{a, "=", v} }
func lt(a attr, v val) cond     { return cmpOp{a, "<", v} }
func le(a attr, v val) cond     { return cmpOp{a, "<=", v} }
func gt(a attr, v val) cond     { return cmpOp{a, ">", v} }
func in(a attr, vs ...val) cond { return inSet{a, vs} }
func not(c cond) cond           { return notOf{c} }
func and(cs ...cond) cond       { return andOf(cs) }
func or(cs ...cond) cond        { return orOf(cs) }
func (c notExists) render(b *strings.Builder) {
	b.WriteString("attribute_not_exists(#" + string(c.a) + ")")
}
func (c notExists) holds(r row) bool       { return r.get(c.a) == nil }
func (c notExists) uses(u *usage)          { u.attr(c.a) }
func (c exists) render(b *strings.Builder) { b.WriteString("attribute_exists(#" + string(c.a) + ")") }
func (c exists) holds(r row) bool          { return r.get(c.a) != nil }
func (c exists) uses(u *usage)             { u.attr(c.a) }

func (c cmpOp) render(b *strings.Builder) {
	b.WriteString("#" + string(c.a) + " " + c.op + " :" + string(c.v))
}

func (c cmpOp) holds(r row) bool {
	d, ok := compare(r.get(c.a), r.val(c.v))
	if !ok {
		return false
	}
	switch c.op {
	case "=":
		return d == 0
	case "<":
		return d < 0
	case "<=":
		return d <= 0
	case ">":
		return d > 0
	}
	return false
}

func (c cmpOp) uses(u *usage) { u.attr(c.a); u.val(c.v) }

func (c inSet) render(b *strings.Builder) {
	b.WriteString("#" + string(c.a) + " IN (")
	for i, v := range c.vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(":" + string(v))
	}
	b.WriteString(")")
}

func (c inSet) holds(r row) bool {
	for _, v := range c.vs {
		if (cmpOp{c.a, "=", v}).holds(r) {
			return true
		}
	}
	return false
}

func (c inSet) uses(u *usage) {
	u.attr(c.a)
	for _, v := range c.vs {
		u.val(v)
	}
}

func (c notOf) render(b *strings.Builder) { b.WriteString("NOT ("); c.c.render(b); b.WriteString(")") }
func (c notOf) holds(r row) bool          { return !c.c.holds(r) }
func (c notOf) uses(u *usage)             { c.c.uses(u) }

func (cs andOf) render(b *strings.Builder) { join(b, cs, " AND ") }
func (cs orOf) render(b *strings.Builder)  { join(b, cs, " OR ") }

func (cs andOf) holds(r row) bool {
	for _, c := range cs {
		if !c.holds(r) {
			return false
		}
	}
	return true
}

func (cs orOf) holds(r row) bool {
	for _, c := range cs {
		if c.holds(r) {
			return true
		}
	}
	return false
}

func (cs andOf) uses(u *usage) { usesAll(u, cs) }
func (cs orOf) uses(u *usage)  { usesAll(u, cs) }

func usesAll(u *usage, cs []cond) {
	for _, c := range cs {
		c.uses(u)
	}
}

// join renders cs joined by sep, each compound part in parentheses.
func join(b *strings.Builder, cs []cond, sep string) {
	for i, c := range cs {
		if i > 0 {
			b.WriteString(sep)
		}
		switch c.(type) {
		case andOf, orOf:
			b.WriteString("(")
			c.render(b)
			b.WriteString(")")
		default:
			c.render(b)
		}
	}
}

// compare orders two scalar values as DynamoDB does: numbers by value, strings and binaries by
// their bytes.
// ok is false when either is missing or their types differ (a comparison DynamoDB calls false).
func compare(a, b types.AttributeValue) (int, bool) {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return 0, false
		}
		return strings.Compare(x.Value, y.Value), true
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		return compareNumbers(x.Value, y.Value)
	case *types.AttributeValueMemberB:
		y, ok := b.(*types.AttributeValueMemberB)
		if !ok {
			return 0, false
		}
		return bytes.Compare(x.Value, y.Value), true
	case *types.AttributeValueMemberBOOL:
		y, ok := b.(*types.AttributeValueMemberBOOL)
		if !ok || x.Value != y.Value {
			return 1, ok
		}
		return 0, true
	}
	return 0, false
}

// compareNumbers orders two DynamoDB numbers: as integers when both are (the ledger's are), else
// exactly as decimals. Exactly: DynamoDB keeps 38 significant digits, and two keys that differ
// only in their 23rd are two items (a float's 53 or 64 bits of mantissa would make them one).
func compareNumbers(a, b string) (int, bool) {
	x, errx := strconv.ParseInt(a, 10, 64)
	y, erry := strconv.ParseInt(b, 10, 64)
	if errx == nil && erry == nil {
		return cmp.Compare(x, y), true
	}
	rx, okx := new(big.Rat).SetString(a)
	ry, oky := new(big.Rat).SetString(b)
	if !okx || !oky {
		return 0, false
	}
	return rx.Cmp(ry), true
}

// update is an update expression: SET, ADD and REMOVE clauses.
type update struct {
	set    []setTo
	add    []addTo
	remove []attr
}

// setTo sets an attribute to a value; with from (if_not_exists) it sets it to the value of from
// when from exists, else to v.
type setTo struct {
	a    attr
	v    val
	from attr // set: "#a = if_not_exists(#from, :v)"
	// quiet: not checked by shows (the table ledger's row identity: the same for every write of
	// the row, and a map that compare does not order).
	quiet bool
}

type addTo struct {
	a attr
	v val
}

func set(a attr, v val) setTo { return setTo{a: a, v: v} }

func (s setTo) render() string {
	if s.from != "" {
		return "#" + string(s.a) + " = if_not_exists(#" + string(s.from) + ", :" + string(s.v) + ")"
	}
	return "#" + string(s.a) + " = :" + string(s.v)
}

// render writes u as an update expression (see clauses.renderInto, which also merges effects).
func (u update) render(b *strings.Builder) { (*clauses)(nil).renderInto(b, &u) }

func (u update) uses(us *usage) {
	for _, s := range u.set {
		us.attr(s.a)
		us.val(s.v)
		if s.from != "" {
			us.attr(s.from)
		}
	}
	for _, a := range u.add {
		us.attr(a.a)
		us.val(a.v)
	}
	for _, a := range u.remove {
		us.attr(a)
	}
}

// shows reports whether r shows this update applied: every attribute it sets to a status (a
// constant) or to the caller's claim id holds that value, and every attribute it removes is
// missing. The write's other values (times, error texts) are not checked: the claim id already
// says whose write it was, and a caller repeating a transition of its claim may send a later time.
// Its ADDs are not checked either: a count tells nothing about which write made it.
func (u update) shows(r row) bool {
	for _, s := range u.set {
		if _, constant := constants[s.v]; s.from != "" || s.quiet || !constant && s.v != vClaim {
			continue
		}
		if !(cmpOp{s.a, "=", s.v}).holds(r) {
			return false
		}
	}
	for _, a := range u.remove {
		if r.get(a) != nil {
			return false
		}
	}
	return true
}

func (u update) with(more update) update {
	return update{
		set:    append(append([]setTo(nil), u.set...), more.set...),
		add:    append(append([]addTo(nil), u.add...), more.add...),
		remove: append(append([]attr(nil), u.remove...), more.remove...),
	}
}
