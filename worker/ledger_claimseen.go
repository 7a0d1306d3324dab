package worker

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A claim transaction does not return the attempt numbers it set. A request that saw the item's
// attempts in the scan (ClaimRequest.seen) requires that count in its condition, so the new
// attempt is the count + 1 and needs no read; the others are read back (readBackClaims).

// claimTxItem is one request's update in a claim transaction.
func (l *ledgerCore) claimTxItem(r ClaimRequest, rowKey Key) types.TransactWriteItem {
	vals := l.claimRequestVals(r)
	if !r.seen {
		return l.txUpdate(rowKey, l.x.claimCond, l.x.claimUpdate, vals)
	}
	vals[":prev"] = ledgerN(int64(r.seenAttempts))
	cond := l.x.claimCondSeen
	if r.seenAttempts == 0 {
		cond = l.x.claimCondSeen0
	}
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

// seenStale reports whether a request's condition failed only because the item's attempt count
// moved since the scan: the item (as it was, old) is not the caller's own claim and holds another
// count. Such an item may still be claimable; it is tried again without the expectation.
func (l *ledgerCore) seenStale(r ClaimRequest, old map[string]types.AttributeValue) bool {
	if !r.seen || len(old) == 0 {
		return false
	}
	st := l.decodeState(old)
	return !l.ownsClaim(r, st) && st.Attempts != r.seenAttempts
}
