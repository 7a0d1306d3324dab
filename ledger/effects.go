package ledger

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Effects are the writes a handler returns with its result. The ledger commits them in the same
// write as the item's completion (CompleteWith, CompleteOnlyWith), so they are applied exactly
// once, with the completion, or not at all:
//
//   - an update of the item itself (Item: set, add, remove attributes) merges into the completion's
//     UpdateItem with the inline ledger: one write, as a hand-written migration loop costs;
//   - writes to other items (Put, PutIfAbsent, Update, Delete, Check), or any effect with the table
//     ledger, go in one TransactWriteItems with the completion, whose ClientRequestToken is the
//     same for every retry of that commit, so a lost answer cannot apply it twice.
//
// An effect that names a key attribute of the item (or, in an update of another item of the items'
// table, of that item), a ledger attribute, the ledger's own table, a reserved table
// (WithReservedTables: a worker's lease table) or the item itself as another write is refused
// before anything is written (an *EffectError naming it). A condition of a write of the caller's (PutIfAbsent of an existing row, Check) that fails
// cancels the whole commit: an *EffectError naming the write, nothing applied. Conflicts with other
// transactions and throttling are retried with backoff. The zero value is empty and ready to use.
// Its methods append to e and return it to chain: an Effects is built for one handler call (one
// shared by calls gathers every call's writes, and races), and is not changed once returned.
type Effects struct {
	item   []Change
	writes []Write
	err    error
}

// Change is one change of an item's attributes: Set, Add or Remove.
type Change struct {
	kind  changeKind
	name  string
	value types.AttributeValue
	err   error
}

type changeKind int

const (
	changeSet changeKind = iota + 1
	changeAdd
	changeRemove
)

// Set sets attribute name to v: a types.AttributeValue, or any Go value attributevalue.Marshal
// takes, in which a map[string]any or []any may hold attribute values as they are (copied from an
// Item's Attrs); an attribute value elsewhere in v (a struct's field) is refused, as Marshal would
// store the struct behind it. A Go slice is a list (L): for a set, give a
// types.AttributeValueMemberSS, NS or BS. Names are attribute names, not paths: "a.b" is the
// attribute "a.b"; a name with [ or ] is refused (an *EffectError), as DynamoDB's expressions
// cannot name it.
func Set(name string, v any) Change { return change(changeSet, name, v) }

// Add adds the number n to attribute name (starting from 0 when it is missing), or the members of
// a set (a types.AttributeValueMemberSS, NS or BS: a Go slice is a list, which DynamoDB does not
// add) to a set attribute.
func Add(name string, n any) Change { return change(changeAdd, name, n) }

// Remove removes attribute name.
func Remove(name string) Change { return Change{kind: changeRemove, name: name} }

func change(k changeKind, name string, v any) Change {
	av, err := marshal(v)
	if err == nil && av == nil {
		err = fmt.Errorf("a %T cannot be stored in DynamoDB", v)
	}
	if err != nil {
		err = fmt.Errorf("attribute %q: %w", name, err)
	}
	return Change{kind: k, name: name, value: av, err: err}
}

// WriteKind says what a Write does.
type WriteKind string

// The kinds of writes to other items.
const (
	WritePut    WriteKind = "put"
	WriteUpdate WriteKind = "update"
	WriteDelete WriteKind = "delete"
	WriteCheck  WriteKind = "check"
)

// Write is one write to another item, committed with the completion.
type Write struct {
	Kind  WriteKind
	Table string
	// Item is a put's whole item (its key included).
	Item map[string]types.AttributeValue
	// IfAbsent makes a put conditional on no item with its key existing.
	IfAbsent bool
	// Key is the item an update, delete or check writes.
	Key Key
	// Changes are an update's.
	Changes []Change
	// Condition is a check's (and may be set on an update or a delete); nil: none.
	Condition *expression.ConditionBuilder
	err       error
}

// Item changes the item itself.
func (e *Effects) Item(changes ...Change) *Effects {
	e.item = append(e.item, changes...)
	return e
}

// Put writes item (a map of attribute values, a map[string]any as Set takes its values, or a
// struct attributevalue.MarshalMap takes) to table, replacing any item with its key.
func (e *Effects) Put(table string, item any) *Effects { return e.put(table, item, false) }

// PutIfAbsent writes item to table only if no item has its key; if one has, the whole commit is
// cancelled and the attempt fails permanently.
func (e *Effects) PutIfAbsent(table string, item any) *Effects { return e.put(table, item, true) }

func (e *Effects) put(table string, item any, ifAbsent bool) *Effects {
	m, err := marshalMap(item)
	e.writes = append(e.writes, Write{Kind: WritePut, Table: table, Item: m, IfAbsent: ifAbsent, err: err})
	return e
}

// Update changes the item key of table (creating it when it is missing, as UpdateItem does).
func (e *Effects) Update(table string, key Key, changes ...Change) *Effects {
	e.writes = append(e.writes, Write{Kind: WriteUpdate, Table: table, Key: key, Changes: changes})
	return e
}

// UpdateIf changes the item key of table only if cond holds when the commit lands; else the whole
// commit is cancelled and the attempt fails permanently.
func (e *Effects) UpdateIf(table string, key Key, cond expression.ConditionBuilder, changes ...Change) *Effects {
	e.writes = append(e.writes, Write{Kind: WriteUpdate, Table: table, Key: key, Changes: changes, Condition: &cond})
	return e
}

// Delete deletes the item key of table.
func (e *Effects) Delete(table string, key Key) *Effects {
	e.writes = append(e.writes, Write{Kind: WriteDelete, Table: table, Key: key})
	return e
}

// Check requires cond to hold for the item key of table when the commit lands; else the whole
// commit is cancelled and the attempt fails permanently.
func (e *Effects) Check(table string, key Key, cond expression.ConditionBuilder) *Effects {
	e.writes = append(e.writes, Write{Kind: WriteCheck, Table: table, Key: key, Condition: &cond})
	return e
}

// AddWrite appends w (the typed form of a write, e.g. decoded from JSON).
func (e *Effects) AddWrite(w Write) *Effects {
	e.writes = append(e.writes, w)
	return e
}

// Empty reports whether e has nothing to write.
func (e *Effects) Empty() bool { return e == nil || len(e.item) == 0 && len(e.writes) == 0 }

// ItemChanges are the changes of the item itself.
func (e *Effects) ItemChanges() []Change { return e.item }

// Writes are the writes to other items.
func (e *Effects) Writes() []Write { return e.writes }

// ErrEffectRefused is what an *EffectError is: an effect that cannot be committed. The attempt
// fails permanently; nothing was written.
var ErrEffectRefused = errors.New("dynapart: effect refused")

// WholeCommit is EffectError.Write when DynamoDB refused a commit with writes to other items as a
// whole, without saying which of its parts it refused (a ValidationException: a key that does not
// match its table's key schema, ...). A commit naming a table that does not exist is no
// EffectError: the ledger returns it as an error naming the tables, and the worker fails its pass.
const WholeCommit = -2

// EffectError names the effect that was refused, before anything was written or by the failed
// condition of a write of the caller's.
type EffectError struct {
	// Write is the index of the write in Effects.Writes; -1 for the item's own changes;
	// WholeCommit when DynamoDB refused the commit as a whole without saying which part.
	Write int
	// Attr is the attribute refused, when one was.
	Attr   string
	Reason string
	Err    error
}

func (e *EffectError) Error() string {
	what := "the item's update"
	switch {
	case e.Write >= 0:
		what = fmt.Sprintf("writes[%d]", e.Write) // as the effects list it, and --exec-effects spells it
	case e.Write == WholeCommit:
		what = "the commit (DynamoDB does not say which of its writes)"
	}
	if e.Attr != "" {
		what += fmt.Sprintf(", attribute %q", e.Attr)
	}
	msg := fmt.Sprintf("%v: %s: %s", ErrEffectRefused, what, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *EffectError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrEffectRefused) hold.
func (e *EffectError) Is(target error) bool { return target == ErrEffectRefused }

// IsPermanent reports an error no retry of the same commit can cure.
func (e *EffectError) IsPermanent() bool { return true }
