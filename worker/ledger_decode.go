package worker

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func (l *ledgerCore) state(ctx context.Context, key Key) (ItemState, error) {
	rowKey, err := l.row.key(key)
	if err != nil {
		return ItemState{}, err
	}
	projExpr, names := ledgerProjection(l.attrs.all())
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.row.table), Key: rowKey, ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(projExpr), ExpressionAttributeNames: names,
	})
	if err != nil {
		return ItemState{}, l.wrapErr("read state", l.row.table, err)
	}
	return l.decodeState(out.Item), nil
}

// decodeState reads a row's state. ClaimUntil is read only while the item is claimed and RetryAt
// only while it waits for a retry: the transitions leave them behind rather than remove them.
func (l *ledgerCore) decodeState(item map[string]types.AttributeValue) ItemState {
	a := l.attrs
	st := ItemState{
		Status:     Status(ledgerStr(item[a.status])),
		Owner:      ledgerStr(item[a.owner]),
		Slot:       int(ledgerNum(item[a.slot])),
		Token:      ledgerNum(item[a.token]),
		Scope:      ledgerStr(item[a.scope]),
		Attempts:   int(ledgerNum(item[a.attempts])),
		ClaimUntil: ledgerTime(item[a.claimUntil]),
		RetryAt:    ledgerTime(item[a.retryAt]),
		DoneAt:     ledgerTime(item[a.doneAt]),
		Error:      ledgerStr(item[a.error]),
	}
	if st.Status != StatusClaimed {
		st.ClaimUntil = time.Time{}
	}
	if st.Status != StatusRetry {
		st.RetryAt = time.Time{}
	}
	return st
}

func ledgerStr(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func ledgerNum(v types.AttributeValue) int64 {
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

func ledgerTime(v types.AttributeValue) time.Time {
	if _, ok := v.(*types.AttributeValueMemberN); !ok {
		return time.Time{}
	}
	return time.UnixMilli(ledgerNum(v))
}
