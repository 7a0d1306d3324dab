package worker

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// What the scan saw of an item's state (the inline ledger) makes its claim cheaper. A request that
// saw the attempt count (ClaimRequest.seen) requires it, so a claim transaction learns the new
// attempt (count + 1) without reading it back; the others are read back (readBackClaims). A
// request that saw no state at all (ClaimRequest.fresh) claims under "no status", which DynamoDB
// evaluates far faster than the general claim condition. Either expectation only narrows the
// condition: an item that no longer matches it is claimed again under the general one.

// claimCondFor is the condition of r's claim and its values.
func (l *ledgerCore) claimCondFor(r ClaimRequest) (string, map[string]types.AttributeValue) {
	vals := l.claimRequestVals(r)
	switch {
	case r.fresh && r.seen && r.seenAttempts == 0:
		vals[":prev"] = ledgerN(0)
		return l.x.claimCondFreshSeen, vals
	case r.fresh && !r.seen:
		return l.x.claimCondFresh, vals
	case r.seen:
		vals[":prev"] = ledgerN(int64(r.seenAttempts))
		if r.seenAttempts == 0 {
			return l.x.claimCondSeen0, vals
		}
		return l.x.claimCondSeen, vals
	}
	return l.x.claimCond, vals
}

// claimTxItem is one request's update in a claim transaction.
func (l *ledgerCore) claimTxItem(r ClaimRequest, rowKey Key) types.TransactWriteItem {
	cond, vals := l.claimCondFor(r)
	return l.txUpdate(rowKey, cond, l.x.claimUpdate, vals)
}

// claimsLanded records the claims of a transaction that succeeded: a request that saw the count
// holds attempt count + 1; the others are read back.
func (l *ledgerCore) claimsLanded(ctx context.Context, reqs []ClaimRequest, rowKeys []Key, idxs []int, outs []ClaimOutcome) error {
	var unseen []int
	for _, i := range idxs {
		r := reqs[i]
		if !r.seen {
			unseen = append(unseen, i)
			continue
		}
		outs[i] = ClaimOutcome{Claimed: true, Claim: Claim{Key: r.Key, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Until: r.Until, Attempt: r.seenAttempts + 1}}
	}
	if len(unseen) == 0 {
		return nil
	}
	return l.readBackClaims(ctx, reqs, rowKeys, unseen, outs)
}

// expectationFailed reports whether a request's condition failed only because the item moved
// since the scan: the item (as it was, old) is not the caller's own claim, and holds another count
// than the one seen, or a state where none was seen (or the refusal did not say). Such an item may
// still be claimable: it is tried again without the expectations (dropExpectations).
func (l *ledgerCore) expectationFailed(r ClaimRequest, old map[string]types.AttributeValue) bool {
	if !r.seen && !r.fresh {
		return false
	}
	if len(old) == 0 {
		return true // not told: the general condition settles it (a missing item included)
	}
	st := l.decodeState(old)
	if l.ownsClaim(r, st) {
		return false
	}
	return (r.seen && st.Attempts != r.seenAttempts) || (r.fresh && st.Status != StatusPending)
}

// dropExpectations makes r an ordinary claim request.
func dropExpectations(r *ClaimRequest) { r.seen, r.fresh = false, false }

// claimOneExpecting claims one item under r's expectation and, when the item moved since the
// scan, once more under the general condition.
func (l *ledgerCore) claimOneExpecting(ctx context.Context, r ClaimRequest, rowKey Key) (ClaimOutcome, error) {
	if !r.fresh && !r.seen {
		return l.claimOne(ctx, r, rowKey)
	}
	o, err := l.claimOne(ctx, r, rowKey)
	var moved *movedError
	if errors.As(err, &moved) {
		dropExpectations(&r)
		return l.claimOne(ctx, r, rowKey)
	}
	return o, err
}

// movedError is claimOne's answer when a claim's expectation failed (expectationFailed).
type movedError struct{}

func (*movedError) Error() string { return "dynapart: the item's state moved since the scan" }
