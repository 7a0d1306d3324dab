package ledger

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func (l *core) state(ctx context.Context, key Key) (ItemState, error) {
	rowKey, err := l.row.key(key)
	if err != nil {
		return ItemState{}, err
	}
	projExpr, names := projection(l.attrNamesOf(append(slices.Clone(stateAttrs), aExists)...))
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.row.table), Key: rowKey, ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(projExpr), ExpressionAttributeNames: names,
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return ItemState{}, l.wrapErr("read state", l.row.table, err)
	}
	l.reads.add(1, out.ConsumedCapacity)
	return l.decodeState(out.Item), nil
}

// attrNamesOf is the names of as in this ledger (those it has).
func (l *core) attrNamesOf(as ...attr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		if n, ok := l.names[a]; ok {
			out = append(out, n)
		}
	}
	return out
}

// decodeState reads a row's state. ClaimUntil is read only while the item is claimed and RetryAt
// only while it waits for a retry: the transitions leave them behind rather than remove them.
func (l *core) decodeState(item map[string]types.AttributeValue) ItemState {
	n := l.names
	st := ItemState{
		Status:     Status(attrStr(item[n[aStatus]])),
		Owner:      attrStr(item[n[aOwner]]),
		Slot:       int(attrNum(item[n[aSlot]])),
		Token:      attrNum(item[n[aToken]]),
		Scope:      attrStr(item[n[aScope]]),
		Claim:      attrStr(item[n[aClaim]]),
		Attempts:   int(attrNum(item[n[aAttempts]])),
		ClaimUntil: attrTime(item[n[aClaimUntil]]),
		RetryAt:    attrTime(item[n[aRetryAt]]),
		DoneAt:     attrTime(item[n[aDoneAt]]),
		Error:      attrStr(item[n[aError]]),
		Version:    attrStr(item[n[aVersion]]),
	}
	if st.Status != StatusClaimed {
		st.ClaimUntil = time.Time{}
	}
	if st.Status != StatusRetry {
		st.RetryAt = time.Time{}
	}
	return st
}

func attrStr(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func attrNum(v types.AttributeValue) int64 {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(n.Value, 64)
		if ferr != nil {
			return 0
		}
		return int64(f)
	}
	return i
}

func attrTime(v types.AttributeValue) time.Time {
	if _, ok := v.(*types.AttributeValueMemberN); !ok {
		return time.Time{}
	}
	return time.UnixMilli(attrNum(v))
}

// deadLetterAttrs are the attributes a dead letter reads besides the key.
var deadLetterAttrs = []attr{aAttempts, aError, aFailedAt}

// deadLetterOf is the dead letter of the failed item key, whose row is row.
func (l *core) deadLetterOf(key Key, row map[string]types.AttributeValue) DeadLetter {
	n := l.names
	return DeadLetter{Key: key, Attempts: int(attrNum(row[n[aAttempts]])), Error: attrStr(row[n[aError]]), At: attrTime(row[n[aFailedAt]])}
}

// encodeState is the row a state decodes from (an existing item's: a condition that the item
// exists holds), so a transition's condition can be evaluated on an ItemState.
func (l *core) encodeState(st ItemState) map[string]types.AttributeValue {
	n := l.names
	row := make(map[string]types.AttributeValue, 8)
	if a, ok := n[aExists]; ok {
		row[a] = attrS("")
	}
	put := func(a attr, v types.AttributeValue) { row[n[a]] = v }
	if st.Status != StatusPending {
		put(aStatus, attrS(string(st.Status)))
	}
	for _, f := range [...]struct {
		a attr
		s string
	}{{aOwner, st.Owner}, {aScope, st.Scope}, {aClaim, st.Claim}, {aError, st.Error}} {
		if f.s != "" {
			put(f.a, attrS(f.s))
		}
	}
	put(aSlot, attrN(int64(st.Slot)))
	put(aToken, attrN(st.Token))
	put(aAttempts, attrN(int64(st.Attempts)))
	for _, f := range [...]struct {
		a attr
		t time.Time
	}{{aClaimUntil, st.ClaimUntil}, {aRetryAt, st.RetryAt}, {aDoneAt, st.DoneAt}} {
		if !f.t.IsZero() {
			put(f.a, attrMillis(f.t))
		}
	}
	return row
}
