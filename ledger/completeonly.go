package ledger

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file holds the writes of complete-only mode, which makes no claim: the completion
// (OpCompleteOnly) and the accounting of failed attempts (OpFailOnly, OpFailOnlyDead,
// OpExhausted). Each carries its own write id in the claim attribute, so a write whose answer was
// lost is recognised as the caller's by the row it left. A failed attempt is recorded by one
// conditional write that holds while the item is unfinished: it counts the attempt and marks the
// item retry (with retry_at and the error), or failed at once for a permanent error. When the
// count reaches MaxAttempts a second write, fenced on the first one's id, moves the item to failed.
// A repeated failure write is refused by its own id (the attempt is counted once).

func completeOnlyOp(r ClaimRequest) Op {
	if r.Fresh {
		return OpCompleteOnlyFresh
	}
	return OpCompleteOnly
}

func (l *core) completeOnly(ctx context.Context, r ClaimRequest) (Result, error) {
	if r.ID == "" {
		r.ID = newID()
	}
	rowKey, err := l.row.key(r.Key)
	if err != nil {
		return Result{}, err
	}
	op := completeOnlyOp(r)
	vals := l.requestVals(r)
	in := l.input(op, rowKey, vals)
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err = l.update(ctx, in)
	if err == nil {
		return Result{Applied: true, Found: ItemState{Status: StatusDone, Claim: r.ID}}, nil
	}
	return l.settleUnclaimed(ctx, op, rowKey, vals, err)
}

// settleUnclaimed decides a write without a claim that failed with err: refused by its condition,
// the row it met tells whether it is the caller's own earlier attempt (its answer lost) or another
// state; of unknown outcome, a consistent read tells whether it landed. An error of unknown
// outcome that the read cannot settle is returned.
func (l *core) settleUnclaimed(ctx context.Context, op Op, rowKey Key, vals values, err error) (Result, error) {
	var ccf *types.ConditionalCheckFailedException
	old := map[string]types.AttributeValue(nil)
	switch {
	case errors.As(err, &ccf):
		old = ccf.Item
		if len(old) == 0 {
			if old, err = l.readRow(ctx, op.String(), rowKey); err != nil {
				return Result{}, err
			}
		}
	case refused(err):
		return Result{}, l.wrapErr(op.String(), l.row.table, err)
	default:
		werr := l.wrapErr(op.String(), l.row.table, err)
		sctx, cancel := settleContext(ctx)
		defer cancel()
		row, rerr := l.readRow(sctx, op.String(), rowKey)
		if rerr != nil || !l.applied(op, row, vals) {
			return Result{}, werr
		}
		old = row
	}
	st := l.decodeState(old)
	return Result{Applied: l.applied(op, old, vals), Found: st}, nil
}

// failOnly records f and returns the item's state after it: retry, failed, or (when the item was
// finished or claimed elsewhere meanwhile) the state found.
func (l *core) failOnly(ctx context.Context, r ClaimRequest, f Failure) (Result, error) {
	if r.ID == "" {
		r.ID = newID()
	}
	rowKey, err := l.row.key(r.Key)
	if err != nil {
		return Result{}, err
	}
	op := OpFailOnly
	if f.Permanent {
		op = OpFailOnlyDead
	}
	vals := l.requestVals(r)
	vals[vRetryAt], vals[vError] = attrMillis(f.RetryAt), attrS(truncateErrorText(f.Error))
	out, err := l.updateFailure(ctx, op, rowKey, vals, func(in *dynamodb.UpdateItemInput) {
		in.ReturnValues = types.ReturnValueAllNew
		allOldOnFailure(in)
	})
	res := Result{Applied: true}
	if err == nil {
		res.Found = l.decodeState(out.Attributes)
	} else if res, err = l.settleUnclaimed(ctx, op, rowKey, vals, err); err != nil || !res.Applied {
		return res, err
	}
	if f.Permanent || res.Found.Status != StatusRetry || res.Found.Attempts < f.MaxAttempts {
		return res, nil
	}
	moved, err := l.exhausted(ctx, r, rowKey, f)
	if moved {
		res.Found.Status = StatusFailed
	}
	return res, err
}

// exhausted moves an item that r's failure write left in retry with its last attempt used to
// failed; false when the item moved on meanwhile.
func (l *core) exhausted(ctx context.Context, r ClaimRequest, rowKey Key, f Failure) (bool, error) {
	vals := values{vClaim: attrS(r.ID), vNow: attrMillis(r.Now), vError: attrS(truncateErrorText(f.Error))}
	if r.Version != "" {
		vals[vVersion] = attrS(r.Version)
	}
	_, err := l.updateFailure(ctx, OpExhausted, rowKey, vals, allOldOnFailure)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return l.applied(OpExhausted, ccf.Item, vals), nil
	}
	return false, l.wrapErr(OpExhausted.String(), l.row.table, err)
}
