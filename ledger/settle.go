package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// This file settles writes whose outcome the caller could not see: a transition whose answer was
// lost and whose repeat (the SDK's own retry) then failed its condition, and a claim whose answer
// was lost for good. Both are settled by reading the row: a row that shows the write's update
// under the caller's claim id (core.applied, derived from the transition itself) shows the write.
// A claim whose row cannot be read is undone (OpRelease on its id), so that a claim the caller
// never learned of does not use up an attempt.

// readRow reads back the state row rowKey for op (to settle it), by a consistent read.
func (l *core) readRow(ctx context.Context, op string, rowKey Key) (map[string]types.AttributeValue, error) {
	return l.getRow(ctx, op+" (read back)", rowKey)
}

// getRow reads the state row rowKey by a consistent read; an error names what and the table.
func (l *core) getRow(ctx context.Context, what string, rowKey Key) (map[string]types.AttributeValue, error) {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.row.table), Key: rowKey, ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		return nil, l.wrapErr(what, l.row.table, err)
	}
	l.reads.add(1, out.ConsumedCapacity)
	return out.Item, nil
}

// settleFenced decides a fenced write refused by its condition: nil when the row shows the write
// applied (an earlier attempt of the same request landed), a *ClaimLostError when it shows
// another state, or an error of unknown outcome when the row cannot be read.
func (l *core) settleFenced(ctx context.Context, f fencedWrite, old map[string]types.AttributeValue) error {
	if len(old) == 0 {
		// No ALL_OLD image (or no row at all): read the row.
		row, err := l.readRow(ctx, f.op.String(), f.rowKey)
		if err != nil {
			return err
		}
		old = row
	}
	if l.applied(f.op, old, f.vals) {
		return nil
	}
	return &ClaimLostError{Op: f.op, Claim: f.c, Found: l.decodeState(old), where: fmt.Sprintf("%s %q", l.name, l.row.table)}
}

// settleCut settles by a read a fenced write that failed with err (outcome unknown: an answer
// lost, or the write cut short when ctx's fence, the lease, ended while it was in flight): nil
// when the row shows the write applied, else err. It writes nothing; a write the fence kept from
// being sent, or that DynamoDB refused as invalid, is not read for. (A write still in flight may
// land after the read: the caller then reports an unknown outcome, as it would without it.)
func (l *core) settleCut(ctx context.Context, f fencedWrite, err error) error {
	if errors.Is(err, errFenceEnded) || refused(err) {
		return err
	}
	rctx, cancel := settleContext(ctx)
	defer cancel()
	if l.settleFenced(rctx, f, nil) == nil {
		return nil
	}
	return err
}

// settleClaim decides a claim whose write outcome is unknown (err). When a consistent read shows
// the request's own claim, the item is claimed. When it shows anything else, the claim did not land
// and err is returned: nothing was used up. When the read fails too, the claim is undone, unless
// ctx's fence (the lease) has ended: then nothing is written (see settleWriteContext); err is
// returned either way.
func (l *core) settleClaim(ctx context.Context, r ClaimRequest, rowKey Key, err error) (ClaimOutcome, error) {
	row, gerr := l.readRow(ctx, "claim", rowKey)
	if gerr == nil {
		if o := l.outcomeFromRow(r, row); o.Claimed {
			return o, nil
		}
		return ClaimOutcome{}, err
	}
	wctx, cancel := settleWriteContext(ctx)
	defer cancel()
	if uerr := l.undo(wctx, r, rowKey); uerr != nil {
		return ClaimOutcome{}, fmt.Errorf("%w (and undoing the claim failed: %w)", err, uerr)
	}
	return ClaimOutcome{}, err
}

// undo gives back a claim the caller made but never learned of (OpRelease on the request's id):
// pending again at once, the attempt not counted. A row that does not show the claim (it never
// landed, or was taken over) is left alone. Once ctx's fence has ended it writes nothing and
// returns an error wrapping errFenceEnded.
func (l *core) undo(ctx context.Context, r ClaimRequest, rowKey Key) error {
	if fenceEnded(ctx) {
		return fmt.Errorf("undo claim: %w (%w)", errFenceEnded, context.Cause(fenceOf(ctx)))
	}
	in := l.input(OpRelease, rowKey, values{vClaim: attrS(r.ID), vNow: l.dueAtOnce(r.Now)})
	_, err := l.update(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return l.wrapErr("undo claim", l.row.table, err)
	}
	return nil
}

// settleContext is the context a settling read runs under: not cut short by the caller's
// cancellation (a shutdown or the end of the lease: a read changes nothing), but bounded. A
// settling write runs under settleWriteContext.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(context.WithoutCancel(ctx), admissionKey{}, nil) // admitted whatever the caller's stop
	return context.WithTimeout(ctx, settleTimeout)
}

// settleTimeout bounds a settling read or undo.
const settleTimeout = 10 * time.Second

// errFenceEnded: a write was not sent because the lease it was made for has ended.
var errFenceEnded = errors.New("dynapart: not written: the lease has ended")

// refused reports an error that says the request itself was refused (invalid, or its table is
// missing) or was not sent (ErrNotSent): no attempt of it was applied. Any other error (a
// network error, a timeout, a server fault, or throttling after an earlier attempt's answer was
// lost) leaves the outcome unknown.
// accessDenied reports an AccessDeniedException: IAM refused the request before anything of it
// was applied, so a commit of effects that is denied returns the error at once, neither sent again
// nor settled by a read (the role may not write a table an effect names: every item that writes
// it meets the same refusal, which the worker stops its pass on).
func accessDenied(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException"
}

func refused(err error) bool {
	return IsValidation(err) || missingTable(err) || errors.Is(err, ErrNotSent)
}

// missingTable reports a ResourceNotFoundException: a table the request names does not exist.
func missingTable(err error) bool {
	var rnf *types.ResourceNotFoundException
	return errors.As(err, &rnf)
}

// outcomeOfRefused settles a claim its condition refused: from the old item the answer carried or,
// when it carried none (a backend that ignores ALL_OLD, or a repeat of a landed claim sent without
// it), from a consistent read of the row, which may show the caller's own claim. When that read
// fails too, a claim of the caller's that may be there is undone, so it uses up no attempt.
func (l *core) outcomeOfRefused(ctx context.Context, r ClaimRequest, rowKey Key, old map[string]types.AttributeValue) (ClaimOutcome, error) {
	if len(old) > 0 {
		return l.outcomeFromRow(r, old), nil
	}
	sctx, cancel := settleContext(ctx)
	defer cancel()
	row, err := l.readRow(sctx, "claim", rowKey)
	if err != nil {
		uctx, ucancel := settleWriteContext(ctx)
		defer ucancel()
		if uerr := l.undo(uctx, r, rowKey); uerr != nil {
			return ClaimOutcome{}, fmt.Errorf("%w (and undoing the claim failed: %w)", err, uerr)
		}
		return ClaimOutcome{}, err
	}
	return l.outcomeFromRow(r, row), nil
}
