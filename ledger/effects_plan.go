package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxTransactItems is DynamoDB's limit on the actions of one TransactWriteItems.
const maxTransactItems = 100

// effectPlan is a commit's effects, checked and rendered: the item's own changes as update
// clauses (to merge into the completion's UpdateItem, or to send as an Update of the source
// item), and the writes to other items as transaction items.
type effectPlan struct {
	item   *clauses
	writes []types.TransactWriteItem
}

// clauses is an update expression split into its SET, REMOVE and ADD parts, with the names and
// values they use (placeholders #0.., :0.., as the SDK's expression package makes them).
type clauses struct {
	set, remove, add []string
	names            map[string]string
	values           map[string]types.AttributeValue
	// shape is the rendered shape these clauses are of (renderChangesOnce), whose set, remove,
	// add and names they share, read-only; nil for clauses rendered on their own.
	shape *renderedShape
}

// planEffects checks e for the item key itemKey and renders it. nil when e is empty.
func (l *core) planEffects(itemKey Key, e *Effects) (*effectPlan, error) {
	if e.Empty() {
		return nil, nil
	}
	if e.err != nil {
		return nil, &EffectError{Write: -1, Reason: "invalid", Err: e.err}
	}
	if n := l.commitActions(e); n > maxTransactItems {
		return nil, &EffectError{Write: len(e.writes) - 1, Reason: fmt.Sprintf("%d writes make %d actions with the completion: DynamoDB commits at most %d actions together", len(e.writes), n, maxTransactItems)}
	}
	p := &effectPlan{}
	if len(e.item) > 0 {
		if err := l.checkChanges(-1, l.sourceTable(), e.item); err != nil {
			return nil, err
		}
		c, err := renderChangesOnce(e.item)
		if err != nil {
			return nil, &EffectError{Write: -1, Reason: "invalid update", Err: err}
		}
		p.item = c
	}
	for i, w := range e.writes {
		if err := l.checkWrite(i, itemKey, w); err != nil {
			return nil, err
		}
		ti, err := renderWrite(w)
		if err != nil {
			return nil, &EffectError{Write: i, Reason: "invalid " + string(w.Kind), Err: err}
		}
		if reason := exprNotUTF8(ti); reason != "" {
			return nil, &EffectError{Write: i, Reason: reason}
		}
		p.writes = append(p.writes, ti)
	}
	if err := sameItemTwice(e.writes); err != nil { // on checked keys
		return nil, err
	}
	return p, nil
}

// sameItemTwice refuses two writes (updates, deletes, checks: those naming a Key) to one item,
// which DynamoDB refuses in one transaction without saying which ("multiple operations on one
// item"): the error names both.
func sameItemTwice(writes []Write) error {
	keys := make([]string, len(writes))
	for i, w := range writes {
		if w.Kind == WritePut || len(w.Key) == 0 {
			continue
		}
		keys[i] = KeyText(w.Key)
		for j := range i {
			if keys[j] == keys[i] && sameTable(writes[j].Table, w.Table) {
				return &EffectError{Write: i, Reason: fmt.Sprintf("writes[%d] writes the same item of %q "+
					"(DynamoDB commits one write per item: give both changes in one update)", j, w.Table)}
			}
		}
	}
	return nil
}

// commitActions is the number of actions of e's commit: the completion, the item's own update when
// the table ledger sends it on its own, and the writes.
func (l *core) commitActions(e *Effects) int {
	n := 1 + len(e.writes)
	if len(e.item) > 0 && l.source != "" {
		n++
	}
	return n
}

// sourceTable is the table the items live in (the inline ledger's own table).
func (l *core) sourceTable() string {
	if l.source != "" {
		return l.source
	}
	return l.row.table
}

// checkChanges refuses changes of a key attribute of the source table, of a ledger attribute, of
// one attribute twice, or of a change that failed to marshal. The ledger's attributes are checked
// only on the table where they live.
func (l *core) checkChanges(write int, table string, cs []Change) error {
	var seen map[string]bool // for many changes; a few are compared in turn (changedBefore)
	if len(cs) > 16 {
		seen = make(map[string]bool, len(cs))
	}
	onSource, onLedger := sameTable(table, l.sourceTable()), sameTable(table, l.row.table)
	for i, c := range cs {
		refuse := func(reason string) error { return &EffectError{Write: write, Attr: c.name, Reason: reason, Err: c.err} }
		switch {
		case c.err != nil:
			return refuse("invalid value")
		case c.name == "":
			return refuse("empty attribute name")
		case !utf8.ValidString(c.name):
			return refuse(utf8Reason("the name", ""))
		case changeValueWhy(c) != "":
			return refuse(changeValueWhy(c))
		case !plainName(c.name):
			// The SDK's expressions read a bracket as a list index, whatever the name says.
			return refuse("a name with [ or ]: names are attribute names, not paths, and DynamoDB's expressions cannot name this one")
		case seen != nil && seen[c.name], seen == nil && changedBefore(cs[:i], c.name):
			return refuse("changed twice in one update")
		case onSource && l.isKeyAttr(c.name) && write < 0:
			return refuse("a key attribute of the item")
		case onSource && l.isKeyAttr(c.name):
			return refuse("a key attribute of the table's items: an update cannot change a key")
		case onLedger && l.isLedgerAttr(c.name):
			return refuse("a ledger attribute")
		case write < 0 && l.removedNames[c.name]:
			// The completion removes it (DynamoDB refuses two changes of one attribute in a write).
			return refuse("an attribute the ledger removes when the item is finished (RemoveOnDone: the pending index's shard attribute)")
		}
		if seen != nil {
			seen[c.name] = true
		}
	}
	return nil
}

// changeValueWhy is why c's value is refused: what no write can carry (unsendable, text that is not
// UTF-8 included); "" when it is not.
func changeValueWhy(c Change) string {
	if p, why := unsendable(c.value); why != "" && c.kind != changeRemove {
		return "the value" + p + " " + why
	}
	return ""
}

// plainName reports whether name has neither [ nor ], which the SDK's expressions read as a path.
func plainName(name string) bool { return !strings.ContainsAny(name, "[]") }

// changedBefore reports whether one of cs changes name.
func changedBefore(cs []Change, name string) bool {
	for _, c := range cs {
		if c.name == name {
			return true
		}
	}
	return false
}

func (l *core) isKeyAttr(name string) bool {
	for _, k := range l.keyAttrs {
		if k == name {
			return true
		}
	}
	return false
}

// isLedgerAttr: an attribute of an item's state the ledger writes, or one under the inline
// ledger's prefix (not the key, which the names map too, nor the attributes removed when an item
// is finished, which a write may set, e.g. to put another item into the pending index).
func (l *core) isLedgerAttr(name string) bool {
	return l.stateNames[name] || l.prefix != "" && strings.HasPrefix(name, l.prefix)
}

// checkWrite refuses a write to the ledger's own table (the table ledger's) or a reserved one
// (WithReservedTables), to the item itself, with ledger attributes of another item of an inline
// ledger's table, or without a table or key.
// fieldNotOfKind names a field of w that its kind does not take, which would be ignored without a
// word (an update with IfAbsent would not be conditional): "" when there is none.
func fieldNotOfKind(w Write) string {
	switch {
	case w.IfAbsent && w.Kind != WritePut:
		return fmt.Sprintf("IfAbsent on a write of kind %q (only a put takes it; give an update or a delete a Condition)", w.Kind)
	case w.IfAbsent && w.Condition != nil:
		return "a put with both IfAbsent and a Condition (IfAbsent is its condition: give one or the other)"
	case len(w.Item) > 0 && w.Kind != WritePut:
		return fmt.Sprintf("an Item on a write of kind %q (only a put takes one; the others name their item by Key)", w.Kind)
	case len(w.Changes) > 0 && w.Kind != WriteUpdate:
		return fmt.Sprintf("Changes on a write of kind %q (only an update takes them)", w.Kind)
	case len(w.Key) > 0 && w.Kind == WritePut:
		return "a Key on a put (a put's key is in its Item)"
	}
	return ""
}

func (l *core) checkWrite(i int, itemKey Key, w Write) error {
	refuse := func(attr, reason string) error { return &EffectError{Write: i, Attr: attr, Reason: reason, Err: w.err} }
	if p, why := attrsUnsendable(w.Key); why != "" {
		return refuse("", "the key's attribute "+p+" "+why)
	}
	if p, why := attrsUnsendable(w.Item); why != "" {
		return refuse("", "the item's attribute "+p+" "+why)
	}
	key := w.Key
	if w.Kind == WritePut {
		key = pick(w.Item, l.keyAttrs)
	}
	switch {
	case w.err != nil:
		return refuse("", "invalid "+string(w.Kind))
	case w.Table == "":
		return refuse("", "no table")
	case w.Kind != WritePut && len(w.Key) == 0:
		return refuse("", "no key")
	case w.Kind == WritePut && len(w.Item) == 0:
		return refuse("", "no item")
	case l.source != "" && sameTable(w.Table, l.row.table):
		return refuse("", fmt.Sprintf("a write to the ledger table %q", w.Table))
	case slices.ContainsFunc(l.reserved, func(t string) bool { return sameTable(w.Table, t) }):
		return refuse("", fmt.Sprintf("a write to dynapart's table %q (the lease table)", w.Table))
	case sameTable(w.Table, l.sourceTable()) && sameKey(key, itemKey, l.keyAttrs):
		return refuse("", "a write to the item itself (change it with Effects.Item; from --exec-effects, the top-level set, add and remove)")
	}
	if reason := fieldNotOfKind(w); reason != "" {
		return refuse("", reason)
	}
	switch w.Kind {
	case WritePut:
		if w.IfAbsent && !slices.ContainsFunc(slices.Collect(maps.Keys(w.Item)), plainName) {
			return refuse("", "a put if absent with no attribute whose name has neither [ nor ] (its key's)")
		}
		if sameTable(w.Table, l.row.table) {
			for name := range w.Item {
				if l.isLedgerAttr(name) {
					return refuse(name, "a ledger attribute")
				}
			}
		}
	case WriteUpdate:
		if len(w.Changes) == 0 {
			return refuse("", "an update with no change (set, add or remove)")
		}
		return l.checkChanges(i, w.Table, w.Changes)
	case WriteDelete, WriteCheck:
	default:
		return refuse("", fmt.Sprintf("unknown kind %q (put, update, delete or check)", w.Kind))
	}
	return nil
}

// pick is the attributes names of item (those it has).
func pick(item map[string]types.AttributeValue, names []string) Key {
	k := Key{}
	for _, n := range names {
		if v, ok := item[n]; ok {
			k[n] = v
		}
	}
	return k
}

// sameKey reports whether a and b are the same item key of a table keyed by attrs.
func sameKey(a, b Key, attrs []string) bool {
	if len(a) != len(attrs) {
		return false
	}
	for _, n := range attrs {
		if d, ok := compare(a[n], b[n]); !ok || d != 0 {
			return false
		}
	}
	return true
}

// renderChanges renders changes (and cond, when not nil) with one of the SDK's expression
// builders, and splits the update into clauses.
func renderChanges(cs []Change, cond *expression.ConditionBuilder) (*clauses, *string, error) {
	var ub expression.UpdateBuilder
	for _, c := range cs {
		name := expression.NameNoDotSplit(c.name)
		switch c.kind {
		case changeSet:
			ub = ub.Set(name, expression.Value(c.value))
		case changeAdd:
			ub = ub.Add(name, expression.Value(c.value))
		case changeRemove:
			ub = ub.Remove(name)
		}
	}
	b := expression.NewBuilder().WithUpdate(ub)
	if cond != nil {
		b = b.WithCondition(*cond)
	}
	e, err := b.Build()
	if err != nil {
		return nil, nil, err
	}
	c := &clauses{names: e.Names(), values: e.Values()}
	for _, line := range strings.Split(strings.TrimSpace(aws.ToString(e.Update())), "\n") {
		kw, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		parts := strings.Split(rest, ", ")
		switch kw {
		case "SET":
			c.set = append(c.set, parts...)
		case "REMOVE":
			c.remove = append(c.remove, parts...)
		case "ADD":
			c.add = append(c.add, parts...)
		default:
			return nil, nil, fmt.Errorf("unexpected update clause %q", line)
		}
	}
	return c, e.Condition(), nil
}

// expr is the update expression of c alone.
func (c *clauses) expr() string {
	var b strings.Builder
	c.renderInto(&b, nil)
	return b.String()
}

// renderInto writes base's clauses merged with c's (either may be nil).
func (c *clauses) renderInto(b *strings.Builder, base *update) {
	var u update
	if base != nil {
		u = *base
	}
	clause := func(kw string, mine []string, extra []string) {
		if len(mine) == 0 && len(extra) == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(kw + " " + strings.Join(append(mine, extra...), ", "))
	}
	var set, remove, add []string
	for _, s := range u.set {
		set = append(set, s.render())
	}
	for _, a := range u.remove {
		remove = append(remove, "#"+string(a))
	}
	for _, a := range u.add {
		add = append(add, "#"+string(a.a)+" :"+string(a.v))
	}
	var cs clauses
	if c != nil {
		cs = *c
	}
	clause("SET", set, cs.set)
	clause("REMOVE", remove, cs.remove)
	clause("ADD", add, cs.add)
}

// renderWrite is w as a transaction item.
func renderWrite(w Write) (types.TransactWriteItem, error) {
	cond := w.Condition
	if w.Kind == WritePut && w.IfAbsent {
		c := absent(w.Item)
		cond = &c
	}
	table := aws.String(w.Table)
	if w.Kind == WriteUpdate {
		c, condExpr, err := renderChanges(w.Changes, cond)
		if err != nil {
			return types.TransactWriteItem{}, err
		}
		return types.TransactWriteItem{Update: &types.Update{TableName: table, Key: w.Key, UpdateExpression: aws.String(c.expr()),
			ConditionExpression: condExpr, ExpressionAttributeNames: c.names, ExpressionAttributeValues: nilIfEmpty(c.values)}}, nil
	}
	var e expression.Expression
	if cond != nil {
		var err error
		if e, err = expression.NewBuilder().WithCondition(*cond).Build(); err != nil {
			return types.TransactWriteItem{}, err
		}
	}
	names, values, condExpr := e.Names(), nilIfEmpty(e.Values()), e.Condition()
	switch w.Kind {
	case WritePut:
		return types.TransactWriteItem{Put: &types.Put{TableName: table, Item: w.Item, ConditionExpression: condExpr,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values}}, nil
	case WriteDelete:
		return types.TransactWriteItem{Delete: &types.Delete{TableName: table, Key: w.Key, ConditionExpression: condExpr,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values}}, nil
	}
	if condExpr == nil {
		return types.TransactWriteItem{}, fmt.Errorf("a check without a condition")
	}
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: table, Key: w.Key, ConditionExpression: condExpr,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values}}, nil
}

func nilIfEmpty(m map[string]types.AttributeValue) map[string]types.AttributeValue {
	if len(m) == 0 {
		return nil
	}
	return m
}

// absent is a condition that holds only when no item with item's key exists: an existing item has
// its key attributes, which item names too, so it fails attribute_not_exists on one of them. Names
// with [ or ] are left out (the SDK's expressions read them as paths; a key's name has neither).
func absent(item map[string]types.AttributeValue) expression.ConditionBuilder {
	var conds []expression.ConditionBuilder
	for _, name := range slices.Sorted(maps.Keys(item)) { // in one order: a repeat is the same request
		if plainName(name) {
			conds = append(conds, expression.AttributeNotExists(expression.NameNoDotSplit(name)))
		}
	}
	if len(conds) == 1 { // one at least: checkWrite refuses a put if absent without a plain name
		return conds[0]
	}
	return expression.And(conds[0], conds[1], conds[2:]...)
}
