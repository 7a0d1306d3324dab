package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
)

// unitMarker is the lease-table item that makes one scan unit (segment or shard) of one pass of
// one slot exclusive: pk "units#<group>#e<epoch>#s<slot>#p<pass>.<run>", sk the unit. It names
// the slot lease that holds the unit (slot, token, owner); a thief saves the unit's scan position
// (cursor, a scan checkpoint of that one unit) on it, and done and dirty when it has read it.
type unitMarker struct {
	unit   int
	owner  string
	slot   int
	token  int64
	cursor string
	done   bool
	dirty  bool
	// thief is what a thief counted while reading the units it took at once (recorded on the
	// first of them when they are done); the owner adds it to its slot's counts.
	thief thiefCounts
}

// thiefCounts are the items a thief scanned and moved to done and failed in the units it read.
type thiefCounts struct{ done, failed, scanned int64 }

// Attribute names of a unit marker (pk and sk are the lease table's key).
const (
	markerPK      = "pk"
	markerSK      = "sk"
	markerOwner   = "owner"
	markerSlot    = "slot"
	markerToken   = "token"
	markerCursor  = "cursor"
	markerDone    = "done"
	markerDirty   = "dirty"
	markerItems   = "done_items"
	markerFailed  = "failed_items"
	markerScanned = "scanned_items"
)

// holder is the slot lease a marker names.
type holder struct {
	owner string
	slot  int
	token int64
}

func holderOf(l *lock.Lease) holder {
	return holder{owner: l.Owner(), slot: l.Slot(), token: l.Token()}
}

func (m unitMarker) heldBy(h holder) bool { return m.slot == h.slot && m.token == h.token }

// markerSet is the markers of one pass of one slot.
type markerSet struct {
	db    DynamoDBClient
	table string
	pk    string
}

// markerSet returns the markers of pass (started by the holder of token run) of slot under the
// plan epoch.
func (w *Worker) markerSet(epoch int64, slot, pass int, run int64) markerSet {
	pk := fmt.Sprintf("units#%s#e%d#s%d#p%d.%d", w.cfg.Group, epoch, slot, pass, run)
	return markerSet{db: w.cfg.Client, table: w.cfg.LeaseTable, pk: pk}
}

func (s markerSet) key(unit int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		markerPK: &types.AttributeValueMemberS{Value: s.pk},
		markerSK: &types.AttributeValueMemberN{Value: strconv.Itoa(unit)},
	}
}

func avInt(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// claim writes the marker of unit for h unless the unit has one: taken reports whether h got it,
// cur is the marker found otherwise.
func (s markerSet) claim(ctx context.Context, unit int, h holder) (taken bool, cur unitMarker, err error) {
	it := s.key(unit)
	it[markerOwner] = &types.AttributeValueMemberS{Value: h.owner}
	it[markerSlot] = avInt(int64(h.slot))
	it[markerToken] = avInt(h.token)
	it[markerDone] = &types.AttributeValueMemberBOOL{Value: false}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: it,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": markerPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, decodeMarker(ccf.Item), nil
	case err != nil:
		return false, unitMarker{}, fmt.Errorf("dynapart: mark unit %d (%s): %w", unit, s.pk, err)
	}
	return true, unitMarker{unit: unit, owner: h.owner, slot: h.slot, token: h.token}, nil
}

// takeOver moves the marker of unit from the holder of from (ended) to h, keeping its cursor and
// done: false when it changed meanwhile.
func (s markerSet) takeOver(ctx context.Context, from unitMarker, h holder) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.key(from.unit),
		UpdateExpression:    aws.String("SET #owner = :owner, #slot = :slot, #token = :token"),
		ConditionExpression: aws.String("#slot = :fromSlot AND #token = :fromToken"),
		ExpressionAttributeNames: map[string]string{
			"#owner": markerOwner, "#slot": markerSlot, "#token": markerToken,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":owner": &types.AttributeValueMemberS{Value: h.owner}, ":slot": avInt(int64(h.slot)), ":token": avInt(h.token),
			":fromSlot": avInt(int64(from.slot)), ":fromToken": avInt(from.token),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("dynapart: take over unit %d (%s): %w", from.unit, s.pk, err)
	}
	return true, nil
}

// save records the unit's cursor for h; errMarkerLost when h no longer holds it.
func (s markerSet) save(ctx context.Context, unit int, h holder, cursor string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.key(unit),
		UpdateExpression:    aws.String("SET #cursor = :cursor"),
		ConditionExpression: aws.String("#slot = :slot AND #token = :token"),
		ExpressionAttributeNames: map[string]string{
			"#cursor": markerCursor, "#slot": markerSlot, "#token": markerToken,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":cursor": &types.AttributeValueMemberS{Value: cursor}, ":slot": avInt(int64(h.slot)), ":token": avInt(h.token),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("dynapart: save unit %d (%s): %w", unit, s.pk, errMarkerLost)
	case err != nil:
		return fmt.Errorf("dynapart: save unit %d (%s): %w", unit, s.pk, err)
	}
	return nil
}

// finish marks unit done for h, with its final cursor, dirty and the thief's counts.
func (s markerSet) finish(ctx context.Context, unit int, h holder, cursor string, dirty bool, counts thiefCounts) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.key(unit),
		UpdateExpression:    aws.String("SET #cursor = :cursor, #done = :true, #dirty = :dirty, #items = :items, #failed = :failed, #scanned = :scanned"),
		ConditionExpression: aws.String("#slot = :slot AND #token = :token"),
		ExpressionAttributeNames: map[string]string{
			"#cursor": markerCursor, "#done": markerDone, "#dirty": markerDirty, "#items": markerItems, "#failed": markerFailed,
			"#scanned": markerScanned, "#slot": markerSlot, "#token": markerToken,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":cursor": &types.AttributeValueMemberS{Value: cursor}, ":true": &types.AttributeValueMemberBOOL{Value: true},
			":dirty": &types.AttributeValueMemberBOOL{Value: dirty}, ":items": avInt(counts.done), ":failed": avInt(counts.failed),
			":scanned": avInt(counts.scanned), ":slot": avInt(int64(h.slot)), ":token": avInt(h.token),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("dynapart: finish unit %d (%s): %w", unit, s.pk, errMarkerLost)
	case err != nil:
		return fmt.Errorf("dynapart: finish unit %d (%s): %w", unit, s.pk, err)
	}
	return nil
}

// errMarkerLost: a unit's marker no longer names this holder (it was taken over).
var errMarkerLost = errors.New("dynapart: the unit was taken over")

// list reads every marker of the pass (consistent), by unit.
func (s markerSet) list(ctx context.Context) (map[int]unitMarker, error) {
	out := map[int]unitMarker{}
	var start map[string]types.AttributeValue
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": markerPK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: s.pk}},
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("dynapart: read the unit markers (%s): %w", s.pk, err)
		}
		for _, it := range res.Items {
			m := decodeMarker(it)
			out[m.unit] = m
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

func decodeMarker(it map[string]types.AttributeValue) unitMarker {
	var m unitMarker
	num := func(name string) int64 {
		if v, ok := it[name].(*types.AttributeValueMemberN); ok {
			n, _ := strconv.ParseInt(v.Value, 10, 64)
			return n
		}
		return -1
	}
	m.unit, m.slot, m.token = int(num(markerSK)), int(num(markerSlot)), num(markerToken)
	m.thief = thiefCounts{done: max(0, num(markerItems)), failed: max(0, num(markerFailed)), scanned: max(0, num(markerScanned))}
	if v, ok := it[markerOwner].(*types.AttributeValueMemberS); ok {
		m.owner = v.Value
	}
	if v, ok := it[markerCursor].(*types.AttributeValueMemberS); ok {
		m.cursor = v.Value
	}
	if v, ok := it[markerDone].(*types.AttributeValueMemberBOOL); ok {
		m.done = v.Value
	}
	if v, ok := it[markerDirty].(*types.AttributeValueMemberBOOL); ok {
		m.dirty = v.Value
	}
	return m
}
