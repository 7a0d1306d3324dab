package worker

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func (l *ledgerCore) complete(ctx context.Context, c Claim, now time.Time) error {
	return l.fenced(ctx, "complete", c, l.x.completeUpdate, completeVals(c, now))
}

// completeVals are the values of a completion under claim c.
func completeVals(c Claim, now time.Time) map[string]types.AttributeValue {
	vals := fenceVals(c)
	vals[":done"] = ledgerS(string(StatusDone))
	vals[":now"] = ledgerMillis(now)
	return vals
}

func (l *ledgerCore) retry(ctx context.Context, c Claim, errText string, retryAt time.Time) error {
	vals := fenceVals(c)
	vals[":retry"] = ledgerS(string(StatusRetry))
	vals[":retryAt"] = ledgerMillis(retryAt)
	vals[":error"] = ledgerS(truncateErrorText(errText))
	return l.fenced(ctx, "retry", c, l.x.retryUpdate, vals)
}

func (l *ledgerCore) deadLetter(ctx context.Context, c Claim, errText string, now time.Time) error {
	vals := fenceVals(c)
	vals[":failed"] = ledgerS(string(StatusFailed))
	vals[":now"] = ledgerMillis(now)
	vals[":error"] = ledgerS(truncateErrorText(errText))
	return l.fenced(ctx, "dead-letter", c, l.x.deadUpdate, vals)
}

func (l *ledgerCore) release(ctx context.Context, c Claim, now time.Time) error {
	vals := fenceVals(c)
	vals[":retry"] = ledgerS(string(StatusRetry))
	vals[":now"] = ledgerMillis(now)
	vals[":minusOne"] = ledgerN(-1)
	return l.fenced(ctx, "release", c, l.x.releaseUpdate, vals)
}

// fenced writes update only while c is the item's current claim; else ErrClaimLost.
func (l *ledgerCore) fenced(ctx context.Context, op string, c Claim, update string, vals map[string]types.AttributeValue) error {
	rowKey, err := l.row.key(c.Key)
	if err != nil {
		return err
	}
	names, used := l.exprInput(vals, l.x.fenceCond, update)
	_, err = l.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(l.x.fenceCond), UpdateExpression: aws.String(update),
		ExpressionAttributeNames: names, ExpressionAttributeValues: used,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Refused: either the claim is not current, or the SDK repeated a write whose first
		// answer was lost and which landed (the row then shows exactly this write).
		return l.settleFenced(ctx, op, c, ccf.Item)
	}
	return l.settleCut(ctx, op, c, l.wrapErr(op, l.row.table, err))
}

func (l *ledgerCore) completeOnly(ctx context.Context, r ClaimRequest) (bool, error) {
	rowKey, err := l.row.key(r.Key)
	if err != nil {
		return false, err
	}
	update := l.x.completeOnlyUpdate
	if r.statusOnly {
		update = l.x.completeOnlyLean
	}
	cond := l.x.completeOnlyCond
	if r.fresh {
		cond = l.x.freshCond
	}
	names, vals := l.exprInput(l.completeOnlyVals(r), cond, update)
	_, err = l.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(cond), UpdateExpression: aws.String(update),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	})
	if err == nil {
		return true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if r.fresh {
			// The item has gained a state since the scan (a failed attempt's retry, say):
			// the general condition decides.
			r.fresh = false
			return l.completeOnly(ctx, r)
		}
		return false, nil
	}
	return false, l.wrapErr("complete", l.row.table, err)
}

// updateIf writes update to the state row rowKey when cond holds. A failed condition is not an
// error: the row shows something else, and there is nothing to do.
func (l *ledgerCore) updateIf(ctx context.Context, op string, rowKey Key, cond, update string, vals map[string]types.AttributeValue) error {
	names, used := l.exprInput(vals, cond, update)
	_, err := l.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(cond), UpdateExpression: aws.String(update),
		ExpressionAttributeNames: names, ExpressionAttributeValues: used,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return l.wrapErr(op, l.row.table, err)
	}
	return nil
}
