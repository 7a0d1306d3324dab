package ledger

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A transition can also be written as a PartiQL UPDATE statement, so that up to BatchSize of them
// go in one BatchExecuteStatement: each statement is a single conditional write, billed as one
// (1 WCU per KB) and answered on its own, where a transaction bills each of its items twice. The
// statement renders the same condition and update trees as the UpdateItem (expr.go), so the
// machine stays defined once. PartiQL has no form for some of them on an item that lacks the
// attribute (an ADD to a missing count fails as invalid, and NOT of a comparison with a missing
// attribute is not certain to hold as a condition expression's does): a transition that uses ADD,
// if_not_exists or NOT is not rendered, and its writes stay UpdateItems or transactions.

// statement is op's transition on rowKey with the values vals as one PartiQL statement; ok is
// false when the transition has no PartiQL form (see above) or a name cannot be quoted.
func (l *core) statement(op Op, rowKey Key, vals values) (types.BatchStatementRequest, bool) {
	c := l.ops[op]
	if len(c.upd.add) > 0 {
		return types.BatchStatementRequest{}, false
	}
	p := partiql{names: c.names, vals: vals}
	p.quoted(l.row.table)
	p.b.WriteString("UPDATE " + p.last)
	for _, s := range c.upd.set {
		if s.from != "" {
			return types.BatchStatementRequest{}, false
		}
		p.b.WriteString(" SET ")
		p.name(s.a)
		p.b.WriteString(" = ")
		p.param(s.v)
	}
	for _, a := range c.upd.remove {
		p.b.WriteString(" REMOVE ")
		p.name(a)
	}
	p.b.WriteString(" WHERE ")
	for _, k := range l.row.keyAttrs {
		p.quoted(k)
		p.b.WriteString(p.last + " = ?")
		p.params = append(p.params, rowKey[k])
		p.b.WriteString(" AND ")
	}
	p.b.WriteString("(")
	p.cond(c.cond)
	p.b.WriteString(")")
	if p.bad {
		return types.BatchStatementRequest{}, false
	}
	return types.BatchStatementRequest{
		Statement: aws.String(p.b.String()), Parameters: p.params,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, true
}

// insert is op's transition on a state row that does not exist yet, as a PartiQL INSERT: the row's
// key and every attribute op's update sets. It is the table ledger's fresh claim (OpClaimFresh on
// no row: an UPDATE does not create one); a row that exists fails it with DuplicateItem, and the
// claim is then made as an UpdateItem, which meets the row under the transition's own condition.
// ok is false for a transition whose update is not a plain set of values.
func (l *core) insert(op Op, rowKey Key, vals values) (types.BatchStatementRequest, bool) {
	c := l.ops[op]
	if len(c.upd.add) > 0 || len(c.upd.remove) > 0 {
		return types.BatchStatementRequest{}, false
	}
	p := partiql{names: c.names, vals: vals}
	p.quoted(l.row.table)
	p.b.WriteString("INSERT INTO " + p.last + " VALUE {")
	for i, k := range l.row.keyAttrs {
		if i > 0 {
			p.b.WriteString(", ")
		}
		p.field(k)
		p.b.WriteString("?")
		p.params = append(p.params, rowKey[k])
	}
	for _, s := range c.upd.set {
		if s.from != "" {
			return types.BatchStatementRequest{}, false
		}
		p.b.WriteString(", ")
		p.field(p.names["#"+string(s.a)])
		p.param(s.v)
	}
	p.b.WriteString("}")
	if p.bad {
		return types.BatchStatementRequest{}, false
	}
	return types.BatchStatementRequest{Statement: aws.String(p.b.String()), Parameters: p.params}, true
}

// field writes name as a field of an INSERT's tuple ('name': ?, the parameter left to the caller);
// a name with a single quote is not rendered.
func (p *partiql) field(name string) {
	if name == "" || strings.ContainsRune(name, '\'') {
		p.bad = true
	}
	p.b.WriteString("'" + name + "': ")
}

// partiql renders one statement: its text and its positional parameters.
type partiql struct {
	b      strings.Builder
	names  map[string]string // "#" + attr -> attribute name
	vals   values
	params []types.AttributeValue
	last   string // the last quoted name
	bad    bool   // something has no PartiQL form
}

// quoted sets p.last to name as a PartiQL identifier; a name with a double quote is not rendered.
func (p *partiql) quoted(name string) {
	if name == "" || strings.ContainsRune(name, '"') {
		p.bad = true
	}
	p.last = `"` + name + `"`
}

func (p *partiql) name(a attr) {
	p.quoted(p.names["#"+string(a)])
	p.b.WriteString(p.last)
}

func (p *partiql) param(v val) {
	av := p.vals.get(v)
	if av == nil {
		p.bad = true
	}
	p.b.WriteString("?")
	p.params = append(p.params, av)
}

func (p *partiql) cond(c cond) {
	switch c := c.(type) {
	case notExists:
		p.name(c.a)
		p.b.WriteString(" IS MISSING")
	case exists:
		p.name(c.a)
		p.b.WriteString(" IS NOT MISSING")
	case cmpOp:
		p.name(c.a)
		p.b.WriteString(" " + c.op + " ")
		p.param(c.v)
	case inSet:
		p.name(c.a)
		p.b.WriteString(" IN [")
		for i, v := range c.vs {
			if i > 0 {
				p.b.WriteString(", ")
			}
			p.param(v)
		}
		p.b.WriteString("]")
	case andOf:
		p.join(c, " AND ")
	case orOf:
		p.join(c, " OR ")
	default: // notOf: see the file comment
		p.bad = true
	}
}

func (p *partiql) join(cs []cond, sep string) {
	for i, c := range cs {
		if i > 0 {
			p.b.WriteString(sep)
		}
		p.b.WriteString("(")
		p.cond(c)
		p.b.WriteString(")")
	}
}
