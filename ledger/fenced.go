package ledger

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func (l *core) complete(ctx context.Context, c Claim, now time.Time) error {
	return l.fenced(ctx, OpComplete, c, values{vNow: attrMillis(now)})
}

func (l *core) retry(ctx context.Context, c Claim, errText string, retryAt time.Time) error {
	return l.fenced(ctx, OpRetry, c, values{vRetryAt: attrMillis(retryAt), vError: attrS(truncateErrorText(errText))})
}

func (l *core) deadLetter(ctx context.Context, c Claim, errText string, now time.Time) error {
	return l.fenced(ctx, OpDeadLetter, c, values{vNow: attrMillis(now), vError: attrS(truncateErrorText(errText))})
}

func (l *core) release(ctx context.Context, c Claim, now time.Time) error {
	return l.fenced(ctx, OpRelease, c, values{vNow: l.dueAtOnce(now)})
}

func (l *core) abandon(ctx context.Context, c Claim) error {
	return l.fenced(ctx, OpAbandon, c, values{})
}

// fenced writes op only while c is the item's current claim; else a *ClaimLostError. vals are the
// write's values besides the claim's id.
func (l *core) fenced(ctx context.Context, op Op, c Claim, vals values) error {
	rowKey, err := l.row.key(c.Key)
	if err != nil {
		return err
	}
	maps.Copy(vals, fenceVals(c))
	_, err = l.updateFailure(ctx, op, rowKey, vals, allOldOnFailure)
	if err == nil {
		return nil
	}
	f := fencedWrite{op: op, c: c, rowKey: rowKey, vals: vals}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Refused: either the claim is not current, or the SDK repeated a write whose first
		// answer was lost and which landed (the row then shows exactly this write).
		return l.settleFenced(ctx, f, ccf.Item)
	}
	return l.settleCut(ctx, f, l.wrapErr(op.String(), l.row.table, err))
}

// fencedWrite is one fenced write, as settling reads it.
type fencedWrite struct {
	op     Op
	c      Claim
	rowKey Key
	vals   values
}
