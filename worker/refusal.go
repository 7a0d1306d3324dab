package worker

import (
	"context"
	"errors"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
)

// stopOnRefusal ends the pass when err, a ledger write's, is one that DynamoDB refuses for good
// and for every item alike (no permission to write a table, a table gone: lock.Retryable says no
// retry helps), as a failed scan ends it: the pass stops claiming and fails, and the slot retries
// passes until OutageTimeout, then Run returns the error. Without it a --once job retried the
// items pass after pass, for ever. A refusal of one item (ValidationException: an item near 400 KB,
// an effect refused) is the caller's, and so are errors that may pass and cancellations.
func (p *pass) stopOnRefusal(err error) {
	if err == nil || lock.Retryable(err) || ledger.IsValidation(err) || errors.Is(err, ledger.ErrEffectRefused) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	p.mu.Lock()
	first := p.refusal == nil
	if first {
		p.refusal = err
	}
	p.mu.Unlock()
	if first {
		p.w.cfg.Logger.Error("dynapart: DynamoDB refuses the ledger's writes; the pass stops and is retried until OutageTimeout",
			"slot", p.lease.Slot(), "err", err)
		p.endFetch(err)
	}
}

// refused is the write refusal that ended the pass, or nil.
func (p *pass) refused() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusal
}
