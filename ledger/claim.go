package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dynapart/dynapart/internal/capacity"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// claimOp is the transition r's claim is made under.
func claimOp(r ClaimRequest) Op {
	if r.Fresh {
		return OpClaimFresh
	}
	return OpClaim
}

func (l *core) claim(ctx context.Context, reqs []ClaimRequest) ([]ClaimOutcome, error) {
	reqs = withIDs(reqs) // a copy: a fresh request found with a state is made again as a general one
	outs := make([]ClaimOutcome, len(reqs))
	rowKeys := make([]Key, len(reqs))
	first := make(map[string]int, len(reqs))
	dupOf := map[int]int{}
	todo := make([]int, 0, len(reqs))
	for i, r := range reqs {
		k, err := l.row.key(r.Key)
		if err != nil {
			return nil, err
		}
		rowKeys[i] = k
		id := l.rowID(k)
		if j, ok := first[id]; ok {
			dupOf[i] = j
			continue
		}
		first[id] = i
		todo = append(todo, i)
	}
	b := &claimBatch{l: l, reqs: reqs, rowKeys: rowKeys, outs: outs}
	for start := 0; start < len(todo); start += BatchSize {
		if err := b.claimChunk(ctx, todo[start:min(start+BatchSize, len(todo))]); err != nil {
			// The claims this call made before the error are given back: the caller learns of
			// none of them, so none may use up an attempt.
			b.undoSettled(ctx, b.claimedSoFar())
			return nil, err
		}
	}
	// A key asked for twice is claimed once; the repeat reports the state it found.
	for i, j := range dupOf {
		if outs[j].Claimed {
			outs[i] = ClaimOutcome{Found: ItemState{Status: StatusClaimed, Claim: outs[j].Claim.ID}}
		} else {
			outs[i] = outs[j]
		}
	}
	return outs, nil
}

// claimOne claims one item with one UpdateItem; the answer carries the new attempt number.
func (l *core) claimOne(ctx context.Context, r ClaimRequest, rowKey Key) (ClaimOutcome, error) {
	op := claimOp(r)
	vals := l.requestVals(r)
	in := l.input(op, rowKey, vals)
	in.ReturnValues = types.ReturnValueUpdatedNew
	wantItem := r.WantItem && l.prefix != "" // the inline ledger's row is the item
	if wantItem {
		in.ReturnValues = types.ReturnValueAllNew
	}
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := l.claimUpdate(ctx, in)
	if err == nil {
		o := claimed(r, int(attrNum(out.Attributes[l.names[aAttempts]])))
		if r.Fresh {
			// OpClaimFresh sets attempt 1 (an answer may leave out a value the write did not change).
			o.Claim.Attempt = 1
		}
		if wantItem {
			o.Item = out.Attributes
		}
		return o, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		o, err := l.outcomeOfRefused(ctx, r, rowKey, ccf.Item)
		if err == nil && r.Fresh && mayClaimAgain(o) {
			r.Fresh = false
			return l.claimOne(ctx, r, rowKey)
		}
		return o, err
	}
	werr := l.wrapErr("claim", l.row.table, err)
	if refused(err) {
		return ClaimOutcome{}, werr
	}
	// The write may have landed: settle it, so that a claim never learned of uses up no attempt.
	sctx, cancel := settleContext(ctx)
	defer cancel()
	return l.settleClaim(sctx, r, rowKey, werr)
}

// claimed is the outcome of r's claim that landed with attempt.
func claimed(r ClaimRequest, attempt int) ClaimOutcome {
	return ClaimOutcome{Claimed: true, Claim: Claim{
		Key: r.Key, ID: r.ID, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Until: r.Until, Attempt: attempt,
		Version: r.Version,
	}}
}

// update runs one conditional UpdateItem; nothing is sent once ctx's fence (the lease the write is
// made for) has ended. It counts condition failures (updateItem counts capacity), and sends the
// write again, after a backoff, when the item was locked by a transaction in flight or DynamoDB
// throttled it past the SDK's own retries (until ctx ends): nothing was written then, and an
// outcome write (a completion with its effects, a failure record) is not given up for a busy item,
// except in turn with others (inTurn).
// (An earlier attempt of the SDK's may have landed with its answer lost; the repeat then fails its
// condition, and every caller settles a failed condition by the row's image.)
func (l *core) update(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	if ctx.Value(inTurnKey{}) != nil {
		return l.updateConflicts(ctx, in, claimConflictRounds)
	}
	return l.updateConflicts(ctx, in, -1)
}

type inTurnKey struct{}

// inTurn marks a context that writes for several items share, sent one after another (a batch's
// singles, the undoing of a batch's claims): each gives up after claimConflictRounds conflicts, so
// that one item transactions keep busy does not use up the time of those after it.
func inTurn(ctx context.Context) context.Context { return context.WithValue(ctx, inTurnKey{}, true) }

// claimUpdate is update for a claim, which gives up after claimConflictRounds conflicts: an item
// that transactions keep writing is claimed at a later pass.
func (l *core) claimUpdate(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return l.updateConflicts(ctx, in, claimConflictRounds)
}

// updateConflicts is update sent again after at most maxConflicts conflicts (-1: no limit).
func (l *core) updateConflicts(ctx context.Context, in *dynamodb.UpdateItemInput, maxConflicts int) (*dynamodb.UpdateItemOutput, error) {
	conflicts := 0
	for round := 1; ; round++ {
		if fenceEnded(ctx) {
			return nil, fmt.Errorf("update: %w (%w)", errFenceEnded, context.Cause(fenceOf(ctx)))
		}
		out, err := l.updateItem(ctx, in)
		if err == nil {
			return out, nil
		}
		if round > 1 {
			err = sentBefore(err) // the earlier round ended throttled: it may have landed
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			l.condFailures.Add(1)
			return nil, err
		}
		var tc *types.TransactionConflictException
		switch {
		case errors.As(err, &tc) && (maxConflicts < 0 || conflicts < maxConflicts):
			conflicts++
		case !capacity.IsThrottle(err):
			return nil, err
		}
		if berr := backoff(ctx, min(round, 6)); berr != nil {
			return nil, err
		}
	}
}

// outcomeFromRow tells why a claim's condition failed from the row as it was (ALL_OLD, or read
// back). A row that shows the request's own claim (a write that succeeded but whose answer was
// lost and that was sent again) is the caller's. No row at all (the inline ledger's item was
// deleted) is reported as pending: there is nothing to do.
func (l *core) outcomeFromRow(r ClaimRequest, row map[string]types.AttributeValue) ClaimOutcome {
	if l.applied(OpClaim, row, l.requestVals(r)) { // OpClaimFresh sets the same, and attempts 1
		return claimed(r, int(attrNum(row[l.names[aAttempts]])))
	}
	return ClaimOutcome{Found: l.decodeState(row)}
}

// mayClaimAgain reports a fresh claim refused because the item has gained a state another claim
// may yet take over (a retry, or a claim that may have expired or be of an older token): it is
// made again under the general condition. Done, failed, gone or the caller's own claim (a
// repeated write whose first answer was lost) are final.
func mayClaimAgain(o ClaimOutcome) bool {
	st := o.Found.Status
	return !o.Claimed && o.Err == nil && (st == StatusClaimed || st == StatusRetry)
}

// backoff waits a little, more with every round, with jitter: transactions that conflicted must
// not meet again at once.
func backoff(ctx context.Context, round int) error {
	d := time.Duration(2<<min(round, 6)) * time.Millisecond // 4ms, 8ms, ... 128ms
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
