package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file settles writes whose outcome the caller could not see: a transition whose answer was
// lost and whose repeat (the SDK's own retry) then failed its condition, and a claim whose answer
// was lost for good. A transition is settled by reading the row: the fence (owner, slot, token and
// attempt) says whether the row shows exactly this claim's write. A claim is settled by reading the
// row back, or, when even that fails, by undoing it with a write fenced by the claim's expiry, so
// that a claim the caller never learned of does not use up an attempt.

// transitionApplied reports whether row shows the transition op of claim c as applied.
func (l *ledgerCore) transitionApplied(op string, row map[string]types.AttributeValue, c Claim) bool {
	if len(row) == 0 {
		return false
	}
	st := l.decodeState(row)
	if st.Owner != c.Owner || st.Slot != c.Slot || st.Token != c.Token {
		return false
	}
	switch op {
	case "complete":
		return st.Status == StatusDone && st.Attempts == c.Attempt
	case "retry":
		return st.Status == StatusRetry && st.Attempts == c.Attempt
	case "dead-letter":
		return st.Status == StatusFailed && st.Attempts == c.Attempt
	case "release":
		return st.Status == StatusRetry && st.Attempts == c.Attempt-1
	}
	return false
}

// settleFenced decides a fenced write refused by its condition: nil when the row shows the write
// applied (an earlier attempt of the same request landed), ErrClaimLost when it shows another
// state, or an error of unknown outcome when the row cannot be read.
func (l *ledgerCore) settleFenced(ctx context.Context, op string, c Claim, old map[string]types.AttributeValue) error {
	if len(old) == 0 {
		// No ALL_OLD image (or no row at all): read the row.
		rowKey, err := l.row.key(c.Key)
		if err != nil {
			return err
		}
		out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.row.table), Key: rowKey, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return l.wrapErr(op+" (read back)", l.row.table, err)
		}
		old = out.Item
	}
	if l.transitionApplied(op, old, c) {
		return nil
	}
	return fmt.Errorf("%w: %s in %s %q (owner %s, slot %d, token %d, attempt %d)",
		ErrClaimLost, op, l.name, l.row.table, c.Owner, c.Slot, c.Token, c.Attempt)
}

// settleCut settles by a read a fenced write that failed with err (outcome unknown) because ctx's
// fence (the lease) ended while it was in flight: nil when the row shows the write applied, else
// err. It writes nothing; a write the fence kept from being sent is not read for.
func (l *ledgerCore) settleCut(ctx context.Context, op string, c Claim, err error) error {
	if !fenceEnded(ctx) || errors.Is(err, errFenceEnded) || refused(err) {
		return err
	}
	rctx, cancel := settleContext(ctx)
	defer cancel()
	if l.settleFenced(rctx, op, c, nil) == nil {
		return nil
	}
	return err
}

// settleClaim decides a claim whose write outcome is unknown (err). When a consistent read shows
// the request's own claim, the item is claimed. When it shows anything else, the claim did not land
// and err is returned: nothing was used up. When the read fails too, the claim is undone by a write
// fenced by the request's exact claim (owner, slot, token and expiry), which gives the attempt back,
// unless ctx's fence (the lease) has ended: then nothing is written (see settleWriteContext); err is
// returned either way.
func (l *ledgerCore) settleClaim(ctx context.Context, r ClaimRequest, rowKey Key, err error) (ClaimOutcome, error) {
	out, gerr := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.row.table), Key: rowKey, ConsistentRead: aws.Bool(true)})
	if gerr == nil {
		st := l.decodeState(out.Item)
		if l.ownsClaim(r, st) {
			return ClaimOutcome{Claimed: true, Claim: Claim{Key: r.Key, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Until: r.Until, Attempt: st.Attempts}}, nil
		}
		return ClaimOutcome{}, err
	}
	wctx, cancel := settleWriteContext(ctx)
	defer cancel()
	if uerr := l.unclaim(wctx, r, rowKey); uerr != nil {
		return ClaimOutcome{}, fmt.Errorf("%w (and undoing the claim failed: %w)", err, uerr)
	}
	return ClaimOutcome{}, err
}

// unclaim gives back a claim the caller made but never learned of: pending again at once, the
// attempt not counted. It writes only when the row shows exactly the request's claim; a row that
// shows anything else (the claim never landed, or was taken over) is left alone. Once ctx's fence
// has ended it writes nothing and returns an error wrapping errFenceEnded.
func (l *ledgerCore) unclaim(ctx context.Context, r ClaimRequest, rowKey Key) error {
	if fenceEnded(ctx) {
		return fmt.Errorf("undo claim: %w (%w)", errFenceEnded, context.Cause(fenceOf(ctx)))
	}
	vals := l.claimRequestVals(r)
	vals[":minusOne"] = ledgerN(-1)
	cond := "#status = :claimed AND #owner = :owner AND #slot = :slot AND #token = :token AND #claimUntil = :until"
	return l.updateIf(ctx, "undo claim", rowKey, cond, l.x.releaseUpdate, vals)
}

// unclaimAll undoes the claims of reqs[idxs] (best effort): their outcome is unknown to the caller.
func (l *ledgerCore) unclaimAll(ctx context.Context, reqs []ClaimRequest, rowKeys []Key, idxs []int) {
	for _, i := range idxs {
		_ = l.unclaim(ctx, reqs[i], rowKeys[i])
	}
}

// settleContext is the context a settling read runs under: not cut short by the caller's
// cancellation (a shutdown or the end of the lease: a read changes nothing), but bounded. A
// settling write runs under settleWriteContext.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

// settleTimeout bounds a settling read or undo.
const settleTimeout = 10 * time.Second

// errFenceEnded: a settling write was not sent because the lease it was made for has ended.
var errFenceEnded = errors.New("dynapart: not written: the lease has ended")

// refused reports an error that says the request itself was refused (invalid, or its table is
// missing): no attempt of it was applied. Any other error (a network error, a timeout, a server
// fault, or throttling after an earlier attempt's answer was lost) leaves the outcome unknown.
func refused(err error) bool {
	var rnf *types.ResourceNotFoundException
	return isValidation(err) || errors.As(err, &rnf)
}

// outcomeOfRefused settles a claim its condition refused: from the old item the answer carried or,
// when it carried none (a backend that ignores ALL_OLD, or a repeat of a landed claim sent without
// it), from a consistent read of the row, which may show the caller's own claim. When that read
// fails too, a claim of the caller's that may be there is undone, so it uses up no attempt.
func (l *ledgerCore) outcomeOfRefused(ctx context.Context, r ClaimRequest, rowKey Key, old map[string]types.AttributeValue) (ClaimOutcome, error) {
	if len(old) > 0 {
		return l.outcomeFromOld(r, old), nil
	}
	sctx, cancel := settleContext(ctx)
	defer cancel()
	out, err := l.db.GetItem(sctx, &dynamodb.GetItemInput{TableName: aws.String(l.row.table), Key: rowKey, ConsistentRead: aws.Bool(true)})
	if err != nil {
		werr := l.wrapErr("read back a refused claim", l.row.table, err)
		uctx, ucancel := settleWriteContext(ctx)
		defer ucancel()
		if uerr := l.unclaim(uctx, r, rowKey); uerr != nil {
			return ClaimOutcome{}, fmt.Errorf("%w (and undoing the claim failed: %w)", werr, uerr)
		}
		return ClaimOutcome{}, werr
	}
	return l.outcomeFromOld(r, out.Item), nil
}
