package worker

import (
	"context"
	"errors"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
)

// stopOnRefusal ends the pass when err, a ledger write's, is one that DynamoDB refuses for good
// and for every item alike (refusedForGood), as a failed scan ends it: the pass stops claiming and
// fails, and the slot retries passes until OutageTimeout, then Run returns the error. Without it a
// --once job retried the items pass after pass, for ever. A refusal of one item
// (ValidationException: an item near 400 KB; an effect refused, which the ledger reports as
// ErrEffectRefused) is the caller's.
func (p *pass) stopOnRefusal(err error) {
	if refusedForGood(err) && !ledger.IsValidation(err) && !errors.Is(err, ledger.ErrEffectRefused) {
		p.refuse(err)
	}
}

// stopOnReadRefusal ends the pass as stopOnRefusal does when err, the read of a source item
// (a versioned worker's, after its claim or its ledger row), is refused for good: no permission
// to read the source table (dynamodb:GetItem), the table gone, a key it does not take. Every item
// would meet the same refusal; counted unprocessable instead, a --once job ended "finished" with
// none of them handled.
func (p *pass) stopOnReadRefusal(err error) {
	if refusedForGood(err) {
		p.refuse(err)
	}
}

// refusedForGood reports whether no retry changes err (lock.Retryable: a permission, a table
// gone, an invalid request); a cancellation or a timeout is not a refusal.
func refusedForGood(err error) bool {
	return err != nil && !lock.Retryable(err) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// refuse records err as the refusal that ends the pass (the first one) and ends its fetch.
func (p *pass) refuse(err error) {
	p.mu.Lock()
	first := p.refusal == nil
	if first {
		p.refusal = err
	}
	p.mu.Unlock()
	if first {
		p.w.cfg.Logger.Error("dynapart: DynamoDB refuses a request for good (a permission, a table); the pass stops",
			"slot", p.lease.Slot(), "err", err)
		p.endFetch(err)
	}
}

// refused is the refusal that ended the pass, or nil.
func (p *pass) refused() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusal
}
