package lock

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// PlanStart is where every scan unit of a group stood when a plan epoch began. A slot item holds
// one checkpoint, which its first holder under a new plan overwrites, so the positions the old
// plan left would be lost for the units that slot no longer owns; the first holder of an epoch
// (once the old plan has stopped) therefore records them all first, in one item: pk
// "plan#<group>", sk the epoch, start (B) this struct as gzipped JSON. It is put only where none
// exists, so every holder of the epoch reads the same one. It must fit an item (400 KB): about
// 20,000 segments with short keys. What the positions mean is the caller's (see worker).
type PlanStart struct {
	Scan  string `json:"scan"`            // a scan checkpoint with every unit's cursor (absent: from the beginning)
	Dirty []int  `json:"dirty,omitempty"` // units whose last owner's pass needs another pass
	Pass  int    `json:"pass"`            // the highest pass of the owners it was composed from
}

// attrPlanStart is the plan start item's gzipped JSON PlanStart.
const attrPlanStart = "start"

func planStartPK(group string) string { return "plan#" + group }

// PlanStart reads the plan start of the group's epoch (consistent): ok false when none was stored.
func (c *Client) PlanStart(ctx context.Context, group string, epoch int64) (ps PlanStart, ok bool, err error) {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(c.table), Key: key(planStartPK(group), int(epoch)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return PlanStart{}, false, fmt.Errorf("lock: read the plan start of %s epoch %d: %w", group, epoch, c.readErr(err))
	}
	if len(out.Item) == 0 {
		return PlanStart{}, false, nil
	}
	ps, err = decodePlanStart(out.Item)
	return ps, err == nil, err
}

// LatestPlanStart reads the plan start of the latest epoch before before that has one, with one
// consistent Query: ok false when none has. It is not always before-1: an epoch none of whose
// holders got as far as storing one (the group was resized again first, or no worker ran in it)
// has none.
func (c *Client) LatestPlanStart(ctx context.Context, group string, before int64) (ps PlanStart, epoch int64, ok bool, err error) {
	out, err := c.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(c.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk < :epoch"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": avS(planStartPK(group)), ":epoch": avN(before),
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(1),
		ConsistentRead:   aws.Bool(true),
	})
	if err != nil {
		return PlanStart{}, 0, false, fmt.Errorf("lock: read the plan start of %s before epoch %d: %w", group, before, c.readErr(err))
	}
	if len(out.Items) == 0 {
		return PlanStart{}, 0, false, nil
	}
	it := out.Items[0]
	sk, ok := it[attrSK].(*types.AttributeValueMemberN)
	if !ok {
		return PlanStart{}, 0, false, errors.New("lock: malformed plan start (no epoch)")
	}
	if epoch, err = strconv.ParseInt(sk.Value, 10, 64); err != nil {
		return PlanStart{}, 0, false, fmt.Errorf("lock: malformed plan start epoch %q", sk.Value)
	}
	ps, err = decodePlanStart(it)
	return ps, epoch, err == nil, err
}

// StorePlanStart stores ps as the plan start of the lease's group and epoch ([Lease.Epoch]) unless
// one is stored already, and returns the one stored (ps, or the earlier one). Nothing is written
// once the lease has ended (an error wrapping ErrLeaseLost).
func (l *Lease) StorePlanStart(ctx context.Context, ps PlanStart) (PlanStart, error) {
	what := fmt.Sprintf("store the plan start of %s epoch %d", l.group, l.epoch)
	if err := l.ended(what); err != nil {
		return PlanStart{}, err
	}
	blob, err := encodePlanStart(ps)
	if err != nil {
		return PlanStart{}, err
	}
	item := key(planStartPK(l.group), int(l.epoch))
	item[attrPlanStart] = &types.AttributeValueMemberB{Value: blob}
	_, err = l.c.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(l.c.table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if _, ok := conditionFailed(err); ok {
		got, ok, err := l.c.PlanStart(ctx, l.group, l.epoch)
		if err == nil && !ok {
			err = errors.New("lock: the plan start vanished")
		}
		return got, err
	}
	if err != nil {
		return PlanStart{}, fmt.Errorf("lock: %s: %w", what, l.c.tableErr(err))
	}
	return ps, nil
}

func encodePlanStart(ps PlanStart) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(ps); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodePlanStart(item map[string]types.AttributeValue) (PlanStart, error) {
	b, ok := item[attrPlanStart].(*types.AttributeValueMemberB)
	if !ok {
		return PlanStart{}, errors.New("lock: malformed plan start (no start attribute)")
	}
	zr, err := gzip.NewReader(bytes.NewReader(b.Value))
	if err != nil {
		return PlanStart{}, fmt.Errorf("lock: malformed plan start: %w", err)
	}
	var ps PlanStart
	if err := json.NewDecoder(io.LimitReader(zr, 64<<20)).Decode(&ps); err != nil {
		return PlanStart{}, fmt.Errorf("lock: malformed plan start: %w", err)
	}
	return ps, nil
}
