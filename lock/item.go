package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of the lease table. A slot item is keyed by pk "group#<name>" and sk the slot (a
// mutex by "mutex#<name>" and sk 0); the group's meta item has sk -1 and holds n, epoch and meta. owner,
// token (the fencing token, +1 per acquisition), version (+1 per renewal), expires_at (ms, by the
// holder's clock), acquired_at, nonce (fresh per acquisition), released, checkpoint and finished
// describe the current holder, epoch the plan it acquired under; see the package documentation,
// "Data model".
const (
	attrPK         = "pk"
	attrSK         = "sk"
	attrOwner      = "owner"
	attrToken      = "token"
	attrVersion    = "version"
	attrExpiresAt  = "expires_at"
	attrReleased   = "released"
	attrCheckpoint = "checkpoint"
	attrFinished   = "finished"
	attrAcquiredAt = "acquired_at"
	attrNonce      = "nonce"
	attrN          = "n"
	attrMeta       = "meta"
	// attrEpoch is the plan epoch: on the meta item, +1 per ResizeGroup (absent: 0); on a slot item,
	// the meta's epoch its holder read in the round that took it.
	attrEpoch = "epoch"
	// attrResetEpoch is the plan epoch the last ResetGroup started, on the meta item (absent: 0):
	// positions recorded under older epochs are not to be resumed from.
	attrResetEpoch = "reset_epoch"

	metaSK = -1
)

func groupPK(group string) string { return "group#" + group }
func mutexPK(name string) string  { return "mutex#" + name }

// slotItem is one slot (or mutex) item as read from the table.
type slotItem struct {
	sk         int
	exists     bool
	owner      string
	token      int64
	version    int64
	expiresAt  time.Time
	acquiredAt time.Time
	released   bool
	finished   bool
	checkpoint string
	nonce      string // of the acquisition write that made the holder; "" on items written before nonces
	epoch      int64  // the plan epoch the holder acquired under (0 when absent)
}

// finishedAt reports whether the slot counts as finished under plan epoch e: finished by a holder
// that acquired it under e or later. A slot finished under an older plan is open again.
func (it slotItem) finishedAt(e int64) bool { return it.finished && it.epoch >= e }

type metaItem struct {
	exists bool
	n      int
	epoch  int64 // +1 per resize; 0 when absent (groups made before resizes)
	reset  int64 // the epoch the last ResetGroup started (0: never reset)
	meta   map[string]string
	paused bool
	reason string // why paused (PausedByOperator, PausedByBudget; "" before reasons were kept)
	budget Budget
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func avB(b bool) types.AttributeValue      { return &types.AttributeValueMemberBOOL{Value: b} }
func avT(t time.Time) types.AttributeValue { return avN(t.UnixMilli()) }

func key(pk string, sk int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: avS(pk), attrSK: avN(int64(sk))}
}

func getS(m map[string]types.AttributeValue, name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(m map[string]types.AttributeValue, name string) int64 {
	if v, ok := m[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func getB(m map[string]types.AttributeValue, name string) bool {
	v, ok := m[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

func getT(m map[string]types.AttributeValue, name string) time.Time {
	if _, ok := m[name]; !ok {
		return time.Time{}
	}
	return time.UnixMilli(getN(m, name)).UTC()
}

func decodeSlot(m map[string]types.AttributeValue) slotItem {
	if len(m) == 0 {
		return slotItem{}
	}
	return slotItem{
		sk:         int(getN(m, attrSK)),
		exists:     true,
		owner:      getS(m, attrOwner),
		token:      getN(m, attrToken),
		version:    getN(m, attrVersion),
		expiresAt:  getT(m, attrExpiresAt),
		acquiredAt: getT(m, attrAcquiredAt),
		released:   getB(m, attrReleased),
		finished:   getB(m, attrFinished),
		checkpoint: getS(m, attrCheckpoint),
		nonce:      getS(m, attrNonce),
		epoch:      getN(m, attrEpoch),
	}
}

func decodeMeta(m map[string]types.AttributeValue) metaItem {
	if len(m) == 0 {
		return metaItem{}
	}
	mi := metaItem{exists: true, n: int(getN(m, attrN)), epoch: getN(m, attrEpoch), reset: getN(m, attrResetEpoch), meta: map[string]string{},
		paused: getB(m, attrPaused), reason: getS(m, attrPausedReason), budget: decodeBudget(m)}
	if mm, ok := m[attrMeta].(*types.AttributeValueMemberM); ok {
		for k, v := range mm.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				mi.meta[k] = s.Value
			}
		}
	}
	return mi
}

func encodeMeta(pk string, n int, meta map[string]string) map[string]types.AttributeValue {
	item := key(pk, metaSK)
	item[attrN] = avN(int64(n))
	m := make(map[string]types.AttributeValue, len(meta))
	for k, v := range meta {
		m[k] = avS(v)
	}
	item[attrMeta] = &types.AttributeValueMemberM{Value: m}
	return item
}

// readAll reads every item under pk with one consistent Query (more only past 1 MB): the slots by
// sk, and the meta item.
func (c *Client) readAll(ctx context.Context, pk string) (map[int]slotItem, metaItem, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(c.table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(pk)},
		ConsistentRead:            aws.Bool(true),
	}
	slots, meta, err := c.query(ctx, in, fmt.Sprintf("%q", pk))
	c.noteSize(pk, meta)
	return slots, meta, err
}

// noteSize records whether a group's meta item, as just read, shows it fits one window (see
// Client.small); a missing item tells nothing.
func (c *Client) noteSize(pk string, meta metaItem) {
	if !meta.exists {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.small == nil {
		c.small = map[string]bool{}
	}
	c.small[pk] = meta.n <= windowSize
}

// knownSmall reports whether the group's meta item was last read with n <= windowSize.
func (c *Client) knownSmall(pk string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.small[pk]
}

// query runs a consistent Query of a group's items to its end (more pages only past 1 MB): the
// slots by sk, and the meta item when the range holds it. what names the range in errors.
func (c *Client) query(ctx context.Context, in *dynamodb.QueryInput, what string) (map[int]slotItem, metaItem, error) {
	slots := map[int]slotItem{}
	var meta metaItem
	for {
		out, err := c.db.Query(ctx, in)
		if err != nil {
			return nil, meta, fmt.Errorf("lock: query %s: %w", what, c.readErr(err))
		}
		for _, it := range out.Items {
			if getN(it, attrSK) == metaSK {
				meta = decodeMeta(it)
				continue
			}
			s := decodeSlot(it)
			slots[s.sk] = s
		}
		if len(out.LastEvaluatedKey) == 0 {
			return slots, meta, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// putNew puts item unless an item with its key exists. On a failed condition the error carries
// the existing item (see conditionFailed).
func (c *Client) putNew(ctx context.Context, item map[string]types.AttributeValue) error {
	_, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(c.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// readSlot reads one slot item with a consistent GetItem.
func (c *Client) readSlot(ctx context.Context, pk string, sk int) (slotItem, error) {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(c.table), Key: key(pk, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return slotItem{}, fmt.Errorf("lock: read %s/%d: %w", pk, sk, c.readErr(err))
	}
	s := decodeSlot(out.Item)
	s.sk = sk
	return s, nil
}
