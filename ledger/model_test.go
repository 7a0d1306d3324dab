package ledger

import (
	"time"
)

// The reference model: the item state machine of doc.go, restated in plain Go, with no DynamoDB
// and none of this package's condition trees. The model-based test (modelcheck_test.go) drives
// both ledgers on DynamoDB Local and moto with random operations and compares every outcome and
// every item's state with this model after each step.

// mItem is one item's state in the model. Times are unix ms; 0 is a missing attribute.
type mItem struct {
	exists     bool // the inline ledger's item exists (always true for the table ledger)
	status     Status
	owner      string
	slot       int
	token      int64
	scope      string // "" when missing (never claimed, or abandoned)
	claim      string // the id of the write that last set it
	claimUntil int64
	attempts   int
	retryAt    int64
}

// mReq is a claim, complete-only or failure request as the model reads it.
type mReq struct {
	id          string
	owner       string
	slot        int
	token       int64
	scope       string
	now, until  int64 // until: the stored expiry (the request's Until plus the ledger's skew)
	fresh       bool
	prev        string // the claim id the complete-only writes require (ClaimRequest.Seen, or id)
	retryAt     int64
	permanent   bool
	maxAttempts int
}

// claimable is OpClaim's condition: no state, a due retry, an expired claim, or one of an older
// token of the caller's slot in the caller's scope.
func (it mItem) claimable(r mReq) bool {
	if !it.exists {
		return false
	}
	switch it.status {
	case StatusPending:
		return true
	case StatusRetry:
		return it.retryAt == 0 || it.retryAt <= r.now
	case StatusClaimed:
		older := it.slot == r.slot && it.token < r.token && it.scope != "" && it.scope == r.scope
		return it.claimUntil == 0 || it.claimUntil <= r.now || older
	}
	return false
}

// unfinished is OpCompleteOnly's condition: not done, not failed, no live claim.
func (it mItem) unfinished(r mReq) bool {
	if !it.exists || it.status.Finished() {
		return false
	}
	return it.status != StatusClaimed || it.claimUntil <= r.now
}

// seen is the fence of a versioned ledger's complete-only writes (the model's ledgers are
// versioned): the claim id the caller saw with the state (its own when it saw none), or none.
func (it mItem) seen(r mReq) bool { return it.claim == "" || it.claim == r.prev }

// completeOnlyCond is the general complete-only writes' condition (OpCompleteOnly, OpFailOnly).
func (it mItem) completeOnlyCond(r mReq) bool { return it.unfinished(r) && it.seen(r) }

// stateless is the fresh writes' condition.
func (it mItem) stateless() bool { return it.exists && it.status == StatusPending }

// claimed is the item after r's claim landed; fresh claims make attempt 1.
func (it mItem) claimed(r mReq, fresh bool) mItem {
	it.status, it.owner, it.slot, it.token, it.scope, it.claim, it.claimUntil = StatusClaimed, r.owner, r.slot, r.token, r.scope, r.id, r.until
	if fresh {
		it.attempts = 1
	} else {
		it.attempts++
	}
	return it
}

// mClaimOutcome is what a claim should return.
type mClaimOutcome struct {
	claimed bool
	attempt int
	found   Status
}

// claimWith applies r's claim (fresh, then general when the item has gained a state since).
func (it *mItem) claimWith(r mReq) mClaimOutcome {
	if r.fresh {
		if it.stateless() {
			*it = it.claimed(r, true)
			return mClaimOutcome{claimed: true, attempt: 1}
		}
		if it.status != StatusClaimed && it.status != StatusRetry {
			return it.refusedClaim(r)
		}
	}
	if it.claimable(r) {
		*it = it.claimed(r, false)
		return mClaimOutcome{claimed: true, attempt: it.attempts}
	}
	return it.refusedClaim(r)
}

// refusedClaim is a refused claim's outcome: the caller's own landed claim is the caller's.
func (it mItem) refusedClaim(r mReq) mClaimOutcome {
	if it.status == StatusClaimed && it.claim == r.id {
		return mClaimOutcome{claimed: true, attempt: it.attempts}
	}
	if !it.exists {
		return mClaimOutcome{found: StatusPending}
	}
	return mClaimOutcome{found: it.status}
}

// fenced applies a fenced transition of claim id: op's target state when the claim is current.
// It returns nil, or the state found (a claim lost). A refused write whose target the row
// already shows under the caller's id (its own earlier landing) is the caller's: nil.
func (it *mItem) fenced(op Op, id string, now, retryAt int64) (lost bool) {
	current := it.exists && it.status == StatusClaimed && it.claim == id
	if !current {
		return !it.showsFenced(op, id)
	}
	switch op {
	case OpComplete:
		it.status = StatusDone
	case OpRetry:
		it.status, it.retryAt = StatusRetry, retryAt
	case OpDeadLetter:
		it.status = StatusFailed
	case OpRelease:
		it.status, it.retryAt = StatusRetry, retryAt // the caller's now less the ledger's skew
		it.attempts--
	case OpAbandon:
		it.scope = ""
	}
	return false
}

// showsFenced: the item shows op applied under claim id.
func (it mItem) showsFenced(op Op, id string) bool {
	if !it.exists || it.claim != id {
		return false
	}
	switch op {
	case OpComplete:
		return it.status == StatusDone
	case OpRetry, OpRelease:
		return it.status == StatusRetry
	case OpDeadLetter:
		return it.status == StatusFailed
	case OpAbandon:
		return it.scope == ""
	}
	return false
}

// completeOnly applies a complete-only write; applied, or the state that refused it.
func (it *mItem) completeOnly(r mReq) (applied bool) {
	ok := it.completeOnlyCond(r)
	if r.fresh && !it.stateless() {
		ok = false // a fresh write refused is not made again (a versioned ledger: see gainedState)
	}
	if ok {
		it.status, it.claim = StatusDone, r.id
		return true
	}
	return it.exists && it.status == StatusDone && it.claim == r.id
}

// failOnly applies a complete-only failure; applied, and the status after it.
func (it *mItem) failOnly(r mReq) (applied bool) {
	if !it.completeOnlyCond(r) || it.claim == r.id {
		want := StatusRetry
		if r.permanent {
			want = StatusFailed
		}
		return it.exists && it.claim == r.id && it.status == want
	}
	it.owner, it.slot, it.token, it.claim, it.claimUntil = r.owner, r.slot, r.token, r.id, 0
	it.attempts++
	if r.permanent {
		it.status, it.retryAt = StatusFailed, 0
		return true
	}
	it.status, it.retryAt = StatusRetry, r.retryAt
	if it.attempts >= r.maxAttempts {
		it.status = StatusFailed // OpExhausted, fenced on this write's id
	}
	return true
}

// redrive moves a failed item to pending, under the new claim id id (a versioned ledger's);
// true when it was failed.
func (it *mItem) redrive(id string) bool {
	if !it.exists || it.status != StatusFailed {
		return false
	}
	*it = mItem{exists: true, claim: id}
	return true
}

// reset is an operator's reprocessing reset (REMOVE status, done_at): the attempts stay.
func (it *mItem) reset() {
	if it.exists {
		it.status = StatusPending
	}
}

// deadline is when the holder of the item's claim must be done with it, by global time: its
// Until by its own clock, less its clock's offset.
func deadline(until time.Time, offset time.Duration) time.Time { return until.Add(-offset) }
