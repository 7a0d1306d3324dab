package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/smithy-go"

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
func (l *core) transact(ctx context.Context, items []types.TransactWriteItem) (a txAnswer, reasons []types.CancellationReason, err error) {
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

// txUpdate is op's write on the state row rowKey in a transaction; a failed condition returns the
// row as it was.
func (l *core) txUpdate(op Op, rowKey Key, vals values) types.TransactWriteItem {
	in := l.input(op, rowKey, vals)
	return types.TransactWriteItem{Update: &types.Update{
		TableName: in.TableName, Key: rowKey,
		ConditionExpression: in.ConditionExpression, UpdateExpression: in.UpdateExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// IsValidation reports a request DynamoDB refuses as invalid (ValidationException): retrying the
// same write cannot succeed.
func IsValidation(err error) bool {
	if err == nil {
		return false
	}
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
}
