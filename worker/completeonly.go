package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
)

// Complete-only mode (Config.CompleteOnly) runs the handler without a claim and completes the item
// with one conditional write (ledger.OpCompleteOnly): for handlers that are themselves one
// conditional write. The ledger's condition decides which items are handled at all: before a
// handler runs, the items' states are checked with the same condition (skipping items finished
// already, or claimed by a live claim of another group), and the write holds only while it still
// holds. Failed attempts are counted as claim mode counts them (ledger.Ledger.FailOnly).

// completeOnlyStates checks, before the handlers run, the state of the items about to be handled
// against the complete-only condition, since no claim decides for them: items finished already
// are skipped, items claimed by a live claim of another group are left for a later pass, and the
// others learn which attempt they make. The inline ledger's state came with the scan (or from the
// pass's renew of it, and dispatch's prefilter judged it: task.checked); the table ledger's rows
// are read, 100 to a call.
func (p *pass) completeOnlyStates(ctx context.Context, todo []task) ([]task, error) {
	var items []map[string]types.AttributeValue
	for _, t := range todo {
		if !t.checked {
			items = append(items, t.item.Attrs)
		}
	}
	if len(items) == 0 {
		return todo, nil
	}
	states, err := p.e.ledger.States(ctx, items)
	if err != nil {
		return nil, err
	}
	now := p.w.cfg.Clock.Now()
	kept := todo[:0]
	for _, t := range todo {
		if t.checked {
			kept = append(kept, t)
			continue
		}
		st := states[0] // unchecked: dispatch found no state in the scanned attributes, so no renew either
		states = states[1:]
		if reopened, open := p.renewRefused(t, st); open {
			st, now = reopened, p.w.cfg.Clock.Now() // due at its renew's time: judged by a clock read after
		}
		if !p.e.ledger.Allows(ledger.OpCompleteOnly, st, p.seenRequest(t.key, st, now)) {
			p.notNow(t.key, st, 0)
			t.item.Ack()
			continue
		}
		t.attempt = st.Attempts + 1
		t.fresh, t.seen = st.Status == StatusPending, st.Claim
		kept = append(kept, t)
	}
	if p.w.cfg.Versions {
		kept = p.contentAfterRows(ctx, kept)
	}
	return kept, nil
}

// contentAfterRows reads again, after their rows, the items whose table ledger rows
// completeOnlyStates read (a versioned ledger's): the scanned content is older than the row, and
// may be a version finished and reopened since, which the write's fence on the row (Seen) would
// not tell from the current one. Items gone since are skipped; a failed read asks for another
// pass (and a read refused for good ends the pass: stopOnReadRefusal). The reads go
// maxContentReads at a time.
func (p *pass) contentAfterRows(ctx context.Context, ts []task) []task {
	current := make([]map[string]types.AttributeValue, len(ts))
	errs := make([]error, len(ts))
	sem := make(chan struct{}, maxContentReads)
	var wg sync.WaitGroup
	for i, t := range ts {
		if t.checked {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rctx, cancel := context.WithTimeout(ctx, p.w.cfg.WriteTimeout)
			defer cancel()
			current[i], errs[i] = p.readItem(rctx, t.key)
		}()
	}
	wg.Wait()
	kept := ts[:0]
	for i, t := range ts {
		switch {
		case t.checked:
		case errs[i] != nil:
			p.stopOnReadRefusal(errs[i])
			p.w.cfg.Logger.Warn("dynapart: reading an item after its ledger row failed; the item is tried again",
				"slot", p.lease.Slot(), "err", errs[i])
			p.againKey(t.key, p.w.cfg.Clock.Now().Add(p.w.cfg.RetryBackoff))
			t.item.Ack()
			continue
		case current[i] == nil:
			p.notNow(t.key, ItemState{}, 0) // deleted since the scan: nothing to handle
			t.item.Ack()
			continue
		default:
			t.current = current[i]
		}
		kept = append(kept, t)
	}
	return kept
}

// maxContentReads is how many item reads contentAfterRows has in flight.
const maxContentReads = 16

// completeOnly runs the handler without a claim and completes the item in one conditional write.
func (p *pass) completeOnly(t task) {
	c := p.w.cfg
	if !p.enterUnlessStopped() {
		return // stopped while paused: not acknowledged
	}
	p.w.pause.leave() // a complete-only item in flight is its handler: only its start waits
	slot := p.lease.Slot()
	item := Item{Key: t.key, Attrs: t.content(), Attempt: max(t.attempt, 1), Slot: slot, Token: p.lease.Token(),
		IdempotencyKey: idempotencyKey(c.Job, c.Table, t.key), effects: &effectSlot{}, Version: p.versionOf(t.content(), nil)}
	start := time.Now()
	t.markRan()
	herr, gaveUp := p.w.runWithGrace(p.workCtx, p.h, item)
	took := time.Since(start)
	if gaveUp {
		p.abandoned(t, c.Clock.Now(), false)
		return
	}
	wctx, cancel := p.writeContext() // from the handler's end, however long it ran
	defer cancel()
	if herr != nil {
		if p.stoppedBy(herr) {
			return // interrupted: not acknowledged
		}
		c.Logger.Warn("dynapart: handler failed (complete-only)", "slot", slot, "err", herr)
		p.completeOnlyFailed(wctx, t, herr, took)
		t.item.Ack()
		return
	}
	now := c.Clock.Now() // the write's time (done_at): after the handler, as a claimed item's completion's
	req := p.claimRequest(t.key, now, now)
	req.Fresh, req.Seen = t.fresh, t.seen
	eff := item.effects.get()
	req.Version = p.versionOf(t.content(), eff)
	res, err := p.e.ledger.CompleteOnlyWith(wctx, req, eff)
	switch {
	case errors.Is(err, ledger.ErrEffectRefused):
		p.completeOnlyFailed(wctx, t, err, took) // stored as claim mode stores it, and logged there
	case ledger.IsValidation(err):
		p.unprocessable(t, err) // e.g. too large for the inline ledger's attributes: no retry can help
		return
	case err != nil:
		c.Logger.Error("dynapart: complete", "slot", slot, "err", err)
		p.stopOnRefusal(err)
		p.againKey(t.key, now.Add(c.RetryBackoff))
	case res.Applied:
		t.markFinished()
		p.done(wctx, t.key, slot, item.Attempt, took)
	default:
		p.notNow(t.key, res.Found, took)
	}
	t.item.Ack()
}

// completeOnlyFailed records a complete-only handler's error like claim mode does: a retry with
// backoff, or a dead letter (Permanent, or MaxAttempts reached). A write of unknown outcome keeps
// the item for a later pass.
func (p *pass) completeOnlyFailed(ctx context.Context, t task, herr error, took time.Duration) {
	c := p.w.cfg
	slot := p.lease.Slot()
	permanent, after := classify(herr)
	if after <= 0 {
		after = c.RetryBackoff
	}
	now := c.Clock.Now()
	at := now.Add(after)
	req := p.claimRequest(t.key, now, now)
	req.Seen, req.Version = t.seen, p.versionOf(t.content(), nil)
	res, err := p.e.ledger.FailOnly(ctx, req,
		ledger.Failure{Error: herr.Error(), RetryAt: at, Permanent: permanent, MaxAttempts: c.MaxAttempts})
	switch {
	case ledger.IsValidation(err):
		// Refused for good, even without its error text: the item cannot take a state (it is
		// near 400 KB). Another attempt would end the same way.
		p.refusedForGood(t, err)
	case err != nil:
		c.Logger.Error("dynapart: record a failed attempt (complete-only); the item will be tried again", "slot", slot, "err", err)
		p.stopOnRefusal(err)
		p.againKey(t.key, at)
	case !res.Applied:
		p.notNow(t.key, res.Found, took) // finished or claimed elsewhere meanwhile
	case res.Found.Status == StatusRetry:
		p.w.stats.retried.Add(1)
		p.w.itemEvent(OutcomeRetried, t.key, slot, 0, took)
		p.againKey(t.key, at)
	default:
		p.deadLettered(ctx, t.key, slot, 0, took)
		c.Logger.Warn("dynapart: item dead-lettered (complete-only)", "slot", slot, "err", herr) // no key: 'dynapart failed' lists them
	}
}
