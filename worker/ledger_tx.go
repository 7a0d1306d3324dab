package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// txAnswer is what one TransactWriteItems said, as batched claims and batched completions read it.
type txAnswer int

const (
	txDone        txAnswer = iota // every write landed
	txCancelled                   // cancelled, with one reason per item
	txUnexplained                 // cancelled without one reason per item
	txConflict                    // a conflict with another transaction: nothing was written
	txFailed                      // any other error: the outcome may be unknown
)

// transact runs one transaction (none once ctx's fence has ended: txFailed); transactItems counts
// its capacity. With txCancelled, reasons has one cancellation reason per item, in the order of
// items; err is the error DynamoDB returned.
func (l *ledgerCore) transact(ctx context.Context, items []types.TransactWriteItem) (a txAnswer, reasons []types.CancellationReason, err error) {
	if fenceEnded(ctx) {
		return txFailed, nil, fmt.Errorf("transaction: %w (%w)", errFenceEnded, context.Cause(fenceOf(ctx)))
	}
	_, err = l.transactItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: items,
	})
	if err == nil {
		return txDone, nil, nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		if len(tce.CancellationReasons) != len(items) {
			return txUnexplained, nil, err
		}
		return txCancelled, tce.CancellationReasons, err
	}
	var tc *types.TransactionConflictException
	if errors.As(err, &tc) {
		return txConflict, nil, err
	}
	return txFailed, nil, err
}

// retryableReason reports a cancellation reason that says nothing against the item's own write:
// cancelled only because another item failed ("" or "None"), or a conflict or throttling
// (conflict = true) that calls for a backoff.
func retryableReason(code string) (retry, conflict bool) {
	switch code {
	case "", "None":
		return true, false
	case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
		return true, true
	}
	return false, false
}

// txUpdate is one conditional update of a transaction on the state row rowKey; a failed
// condition returns the row as it was.
func (l *ledgerCore) txUpdate(rowKey Key, cond, update string, vals map[string]types.AttributeValue) types.TransactWriteItem {
	names, used := l.exprInput(vals, cond, update)
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(cond), UpdateExpression: aws.String(update),
		ExpressionAttributeNames: names, ExpressionAttributeValues: used,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}
