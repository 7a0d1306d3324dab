package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Unit markers. A unit marker makes one scan unit (a segment or shard) of one pass of one slot
// exclusive to one slot lease, so that a lease whose own share is done can take units of a slot
// still working (work stealing) without both reading them. The policy (when to mark, whom to
// steal from) is the caller's; this file is the markers' storage. A marker names the lease that
// holds its unit (slot and token; owner for the record), and every write to it after its put is
// conditioned on the slot and token it names: a lease that no longer holds the unit (it was taken
// over) changes nothing. Like every write through a Lease, none is sent once the lease has ended.

// Attribute names of a unit marker (pk and sk are the lease table's key; owner and token are
// spelled as on a slot item).
const (
	attrUnitSlot    = "slot"
	attrUnitCursor  = "cursor"
	attrUnitDone    = "done"
	attrUnitDirty   = "dirty"
	attrUnitItems   = "done_items"
	attrUnitFailed  = "failed_items"
	attrUnitScanned = "scanned_items"
)

// ErrUnitTakenOver means a unit's marker no longer names the lease that wrote to it: another lease
// took the unit over. The marker is unchanged.
var ErrUnitTakenOver = errors.New("lock: the unit was taken over")

// UnitPass names the unit markers of one pass over one slot's share: they are the items of pk
// "units#<group>#e<epoch>#s<slot>#p<pass>.<run>", one per unit (sk).
type UnitPass struct {
	Group string
	Epoch int64 // the plan epoch the pass reads under
	Slot  int   // the slot whose share the units are
	Pass  int   // the pass's number
	Run   int64 // the fencing token of the holder that started the pass
}

func (p UnitPass) pk() string {
	return fmt.Sprintf("units#%s#e%d#s%d#p%d.%d", p.Group, p.Epoch, p.Slot, p.Pass, p.Run)
}

// UnitMarker is one unit's marker: the slot lease holding the unit (Owner, Slot, Token; -1 when
// absent), the unit's scan position saved by it (Cursor), and Done and Dirty once it has read the
// unit to its end.
type UnitMarker struct {
	Unit   int
	Owner  string
	Slot   int
	Token  int64
	Cursor string
	Done   bool
	Dirty  bool // an item of the unit needs another pass
	// Thief is what a lease of another slot counted while reading the units it took at once,
	// recorded on the first of them when they are done: the pass's owner adds it to its own.
	Thief UnitCounts
}

// UnitCounts are the items a lease scanned, moved to done and moved to failed in the units it read.
type UnitCounts struct{ Done, Failed, Scanned int64 }

// UnitEnd is what a lease records on a unit's marker when it has read the unit to its end.
type UnitEnd struct {
	Cursor string
	Dirty  bool
	Thief  UnitCounts
}

// HeldBy reports whether the marker names l (its slot and token).
func (m UnitMarker) HeldBy(l *Lease) bool { return m.Slot == l.slot && m.Token == l.token }

// MarkUnit puts the marker of unit for l unless the unit has one: taken reports whether l got it;
// otherwise cur is the marker found.
func (l *Lease) MarkUnit(ctx context.Context, p UnitPass, unit int) (taken bool, cur UnitMarker, err error) {
	what := fmt.Sprintf("mark unit %d (%s)", unit, p.pk())
	if err := l.ended(what); err != nil {
		return false, UnitMarker{}, err
	}
	it := key(p.pk(), unit)
	it[attrOwner], it[attrUnitSlot], it[attrToken] = avS(l.c.owner), avN(int64(l.slot)), avN(l.token)
	it[attrUnitDone] = avB(false)
	err = l.c.putNew(ctx, it)
	if cf, ok := conditionFailed(err); ok {
		return false, decodeUnitMarker(cf.Item), nil
	}
	if err != nil {
		return false, UnitMarker{}, fmt.Errorf("lock: %s: %w", what, l.c.tableErr(err))
	}
	return true, UnitMarker{Unit: unit, Owner: l.c.owner, Slot: l.slot, Token: l.token}, nil
}

// TakeOverUnit moves the marker from (read by UnitMarkers or MarkUnit) to l, keeping its cursor
// and done: false when it no longer names the lease it named then (unless it names l: the
// take-over landed, its answer lost).
func (l *Lease) TakeOverUnit(ctx context.Context, p UnitPass, from UnitMarker) (bool, error) {
	what := fmt.Sprintf("take over unit %d (%s)", from.Unit, p.pk())
	err := l.writeUnit(ctx, what, p, from.Unit, unitWrite{
		update: "SET #owner = :owner, #slot = :slot, #token = :token",
		cond:   "#slot = :fromSlot AND #token = :fromToken",
		names:  map[string]string{"#owner": attrOwner, "#slot": attrUnitSlot, "#token": attrToken},
		values: map[string]types.AttributeValue{
			":owner": avS(l.c.owner), ":slot": avN(int64(l.slot)), ":token": avN(l.token),
			":fromSlot": avN(int64(from.Slot)), ":fromToken": avN(from.Token),
		},
	})
	var moved *unitMovedError
	if errors.As(err, &moved) {
		return l.takeOverLanded(ctx, p, from.Unit, moved.found)
	}
	return err == nil, err
}

// takeOverLanded settles a take-over whose condition failed: the marker found (found, from the
// refusal; read again when the answer carried none) may name l already, the take-over having
// landed with its answer lost and the SDK's repeat refused by the write itself (helper-75:
// reported not taken, and the pass failed "a unit marker of this slot changed under its holder").
func (l *Lease) takeOverLanded(ctx context.Context, p UnitPass, unit int, found map[string]types.AttributeValue) (bool, error) {
	if len(found) == 0 {
		out, err := l.c.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(l.c.table), Key: key(p.pk(), unit), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return false, fmt.Errorf("lock: read unit %d (%s) after its take-over was refused: %w", unit, p.pk(), l.c.readErr(err))
		}
		found = out.Item
	}
	return len(found) > 0 && decodeUnitMarker(found).HeldBy(l), nil
}

// SaveUnitCursor records the unit's scan position for l; an error wrapping ErrUnitTakenOver when
// l no longer holds the unit.
func (l *Lease) SaveUnitCursor(ctx context.Context, p UnitPass, unit int, cursor string) error {
	return l.writeUnit(ctx, fmt.Sprintf("save unit %d (%s)", unit, p.pk()), p, unit, unitWrite{
		update: "SET #cursor = :cursor",
		cond:   "#slot = :slot AND #token = :token",
		names:  map[string]string{"#cursor": attrUnitCursor, "#slot": attrUnitSlot, "#token": attrToken},
		values: map[string]types.AttributeValue{":cursor": avS(cursor), ":slot": avN(int64(l.slot)), ":token": avN(l.token)},
	})
}

// FinishUnit marks the unit done for l, with its final cursor, dirty and the thief's counts; an
// error wrapping ErrUnitTakenOver when l no longer holds the unit.
func (l *Lease) FinishUnit(ctx context.Context, p UnitPass, unit int, end UnitEnd) error {
	return l.writeUnit(ctx, fmt.Sprintf("finish unit %d (%s)", unit, p.pk()), p, unit, unitWrite{
		update: "SET #cursor = :cursor, #done = :true, #dirty = :dirty, #items = :items, #failed = :failed, #scanned = :scanned",
		cond:   "#slot = :slot AND #token = :token",
		names: map[string]string{
			"#cursor": attrUnitCursor, "#done": attrUnitDone, "#dirty": attrUnitDirty, "#items": attrUnitItems, "#failed": attrUnitFailed,
			"#scanned": attrUnitScanned, "#slot": attrUnitSlot, "#token": attrToken,
		},
		values: map[string]types.AttributeValue{
			":cursor": avS(end.Cursor), ":true": avB(true),
			":dirty": avB(end.Dirty), ":items": avN(end.Thief.Done), ":failed": avN(end.Thief.Failed),
			":scanned": avN(end.Thief.Scanned), ":slot": avN(int64(l.slot)), ":token": avN(l.token),
		},
	})
}

// unitWrite is one conditional update of a unit marker.
type unitWrite struct {
	update, cond string
	names        map[string]string
	values       map[string]types.AttributeValue
}

// unitMovedError is a unit write's failed condition: an ErrUnitTakenOver, with the marker found.
type unitMovedError struct {
	what  string
	found map[string]types.AttributeValue // empty when the answer carried none
}

func (e *unitMovedError) Error() string { return fmt.Sprintf("lock: %s: %v", e.what, ErrUnitTakenOver) }
func (e *unitMovedError) Unwrap() error { return ErrUnitTakenOver }

// writeUnit sends w to the marker of unit while l has not ended; a failed condition is a
// *unitMovedError (an ErrUnitTakenOver).
func (l *Lease) writeUnit(ctx context.Context, what string, p UnitPass, unit int, w unitWrite) error {
	if err := l.ended(what); err != nil {
		return err
	}
	_, err := l.c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.c.table), Key: key(p.pk(), unit),
		UpdateExpression:                    aws.String(w.update),
		ConditionExpression:                 aws.String(w.cond),
		ExpressionAttributeNames:            w.names,
		ExpressionAttributeValues:           w.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if cf, ok := conditionFailed(err); ok {
		return &unitMovedError{what: what, found: cf.Item}
	}
	if err != nil {
		return fmt.Errorf("lock: %s: %w", what, l.c.tableErr(err))
	}
	return nil
}

// UnitMarkers reads every marker of the pass (consistent), by unit.
func (c *Client) UnitMarkers(ctx context.Context, p UnitPass) (map[int]UnitMarker, error) {
	out := map[int]UnitMarker{}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(c.table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(p.pk())},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		res, err := c.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("lock: read the unit markers (%s): %w", p.pk(), c.readErr(err))
		}
		for _, it := range res.Items {
			m := decodeUnitMarker(it)
			out[m.Unit] = m
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

func decodeUnitMarker(it map[string]types.AttributeValue) UnitMarker {
	num := func(name string) int64 {
		if v, ok := it[name].(*types.AttributeValueMemberN); ok {
			n, _ := strconv.ParseInt(v.Value, 10, 64)
			return n
		}
		return -1
	}
	return UnitMarker{
		Unit: int(num(attrSK)), Slot: int(num(attrUnitSlot)), Token: num(attrToken),
		Owner: getS(it, attrOwner), Cursor: getS(it, attrUnitCursor),
		Done: getB(it, attrUnitDone), Dirty: getB(it, attrUnitDirty),
		Thief: UnitCounts{Done: max(0, num(attrUnitItems)), Failed: max(0, num(attrUnitFailed)), Scanned: max(0, num(attrUnitScanned))},
	}
}
