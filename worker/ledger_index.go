package worker

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// indexLeaver is a ledger that takes finished items out of a sparse pending index; both ledgers
// are. Its writes count in the ledger's capacity (ConsumedWCU).
type indexLeaver interface {
	// leaveIndex removes the shard attribute from the source item key (if the item still exists).
	leaveIndex(ctx context.Context, key Key, shardAttr string) error
}

func (l *InlineLedger) leaveIndex(ctx context.Context, key Key, shardAttr string) error {
	return l.core.removeAttr(ctx, l.core.row.table, key, shardAttr)
}

func (l *TableLedger) leaveIndex(ctx context.Context, key Key, shardAttr string) error {
	return l.core.removeAttr(ctx, l.source, key, shardAttr)
}

// removeAttr removes attr from the item key of table, when the item exists.
func (l *ledgerCore) removeAttr(ctx context.Context, table string, key Key, attr string) error {
	var cond strings.Builder
	names := map[string]string{"#s": attr}
	for i, k := range keysSorted(key) {
		if i > 0 {
			cond.WriteString(" AND ")
		}
		n := "#k" + strconv.Itoa(i)
		names[n] = k
		cond.WriteString("attribute_exists(" + n + ")")
	}
	_, err := l.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key, UpdateExpression: aws.String("REMOVE #s"),
		ConditionExpression: aws.String(cond.String()), ExpressionAttributeNames: names,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
	case !errors.As(err, &ccf):
		return l.wrapErr("leave the pending index", table, err)
	}
	return nil
}

// prefilterAttrs are the state attributes the worker's prefilter reads from scanned items.
func (a stateAttrs) prefilterAttrs() []string {
	return []string{a.status, a.claimUntil, a.slot, a.token, a.scope, a.retryAt, a.attempts}
}

// scanProjection is projection plus the state attributes a prefilter reads (projection itself
// when empty: everything is read).
func (l *InlineLedger) scanProjection(projection []string) []string {
	if len(projection) == 0 {
		return projection
	}
	return append(append([]string(nil), projection...), l.core.attrs.prefilterAttrs()...)
}

// stateOf decodes the state a scanned item carries.
func (l *InlineLedger) stateOf(item map[string]types.AttributeValue) ItemState {
	return l.core.decodeState(item)
}
