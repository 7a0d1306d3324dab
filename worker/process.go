package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
)

// process claims an item (unless claimed in a batch), runs the handler and records the outcome.
func (p *pass) process(t task) {
	c := p.w.cfg
	if t.follow {
		p.followOne(t) // resolves the candidate through process calls of its own
		return
	}
	if p.workCtx.Err() != nil {
		// Stopped before this item started: give a batch claim back, leave the item unacknowledged.
		if t.claim != nil {
			p.releaseUnsent([]task{t})
			p.gate.give(1)
		}
		return
	}
	if p.w.pause.flagged() {
		t = p.holdWhilePaused(t) // claimOne below waits for the resume
	}
	if c.CompleteOnly {
		p.completeOnly(t)
		return
	}
	now := c.Clock.Now()
	claim := t.claim
	if claim != nil {
		defer p.gate.give(1) // the batched claim's handler is free again when process returns
	} else if claim, t.current = p.claimOne(t, now); claim == nil {
		return
	}
	// The writes before the handler share one WriteTimeout from here (a claim has its own, from
	// after a pause's wait); those after it get their own (handle), however long it ran.
	wctx, cancel := p.writeContext()
	defer cancel()
	switch {
	case t.claim != nil && p.w.tooLate(*claim, now):
		p.giveBackLate(wctx, t)
		return
	case t.claim == nil && p.workCtx.Err() != nil:
		// Stopped, or the lease ended, while claiming: the handler does not start.
		p.interrupted(wctx, t, *claim, 0)
		return
	}
	if !p.contentAsClaimed(wctx, &t, claim) {
		return
	}
	if p.changeUndone(t, *claim) {
		p.handledAlready(wctx, t, *claim)
		return
	}
	if claim.Attempt > c.MaxAttempts {
		// Earlier attempts ended without an outcome (their workers died): do not loop forever.
		msg := fmt.Sprintf("dynapart: attempt %d exceeds MaxAttempts %d (earlier attempts ended without an outcome)", claim.Attempt, c.MaxAttempts)
		p.deadLetter(wctx, t, *claim, msg, 0)
		t.item.Ack()
		return
	}
	p.handle(t, *claim)
}

// claimOne claims t's item alone; nil when it was not claimed (the item is then accounted for).
// The claim write is not cut short by shutdown (its WriteTimeout starts after a pause's wait), so
// a graceful stop never leaves a claim of unknown outcome behind: what it claims, it handles or
// releases.
func (p *pass) claimOne(t task, now time.Time) (*Claim, map[string]types.AttributeValue) {
	c := p.w.cfg
	if t.refused != nil && !p.reopenRefused(&t) {
		return nil, nil
	}
	if !p.enterUnlessStopped() {
		return nil, nil // stopped while paused: not acknowledged, the next holder rescans it
	}
	wctx, cancel := p.writeContext()
	defer cancel()
	now = c.Clock.Now() // later than the caller's when it waited for a resume
	req := p.claimRequest(t.key, now, now.Add(c.ClaimTTL))
	req.Fresh = t.fresh
	req.Version = p.versionOf(t.item.Attrs, nil)
	req.WantItem = c.Versions // contentAsClaimed
	// Admitted by fetchCtx: a stop ends a wait for write capacity before the claim is sent.
	outs, err := p.e.ledger.Claim(ledger.WithAdmission(wctx, p.fetchCtx), []ClaimRequest{req})
	p.w.pause.leave()
	if err != nil && ledger.IsValidation(err) {
		p.unprocessable(t, err)
		return nil, nil
	}
	if err != nil && p.fetchCtx.Err() != nil {
		return nil, nil // stopped (while waiting for write capacity): not acknowledged, the next holder rescans it
	}
	if err != nil {
		c.Logger.Warn("dynapart: claim failed; the item will be tried again", "slot", p.lease.Slot(), "err", err)
		p.stopOnRefusal(err)
		p.againKey(t.key, now.Add(min(c.RetryBackoff, c.PollInterval)))
		t.item.Ack()
		return nil, nil
	}
	if !outs[0].Claimed {
		if !t.reopened {
			if _, open := p.renewRefused(t, outs[0].Found); open {
				t.fresh, t.reopened = false, true
				return p.claimOne(t, now) // reopened for its new content: claimed in this pass
			}
		}
		p.notNow(t.key, outs[0].Found, 0)
		t.item.Ack()
		return nil, nil
	}
	p.w.stats.claimed.Add(1)
	claim := &outs[0].Claim
	p.w.itemEvent(OutcomeClaimed, claim.Key, claim.Slot, claim.Attempt, 0)
	return claim, outs[0].Item
}

// handle runs the handler on a claimed item and records the outcome, with writes bounded by
// WriteTimeout from the handler's end.
func (p *pass) handle(t task, claim Claim) {
	c := p.w.cfg
	item := Item{Key: t.key, Attrs: t.content(), Attempt: claim.Attempt, Slot: claim.Slot, Token: claim.Token,
		IdempotencyKey: idempotencyKey(c.Job, c.Table, t.key), Claim: claim.ID, effects: &effectSlot{},
		Version: claim.Version}
	hctx, hcancel := p.w.claimContext(p.workCtx, claimDeadline(c.ClaimTTL, claim.Until))
	t.markRan()
	start, startClock := time.Now(), c.Clock.Now()
	herr, gaveUp := p.w.runWithGrace(hctx, p.h, item)
	took := time.Since(start)
	if t.claim != nil {
		p.gate.observe(c.Clock.Now().Sub(startClock))
	}
	expiring := errors.Is(context.Cause(hctx), ErrClaimExpiring)
	hcancel()
	wctx, cancel := p.writeContext()
	defer cancel()
	if gaveUp {
		p.abandonClaim(wctx, claim)
		p.abandoned(t, claim.Until, expiring || p.workCtx.Err() == nil)
		return
	}

	eff := item.effects.get()
	switch {
	case herr == nil && p.completions != nil && eff.Empty():
		p.completions <- completion{t: t, claim: claim, took: took}
		return // the completer acknowledges it
	case herr == nil:
		// The completion records the content the effects leave; a refusal of the effects
		// dead-letters the content as it is (claim's own version).
		commit := claim
		commit.Version = p.versionOf(t.content(), eff)
		p.completed(wctx, t, claim, p.e.ledger.CompleteWith(wctx, commit, c.Clock.Now(), eff), took)
	case !expiring && p.stoppedBy(herr):
		p.interrupted(wctx, t, claim, took)
		return
	default:
		p.failed(wctx, t, claim, herr, took)
	}
	t.item.Ack()
}

// abandonClaim keeps an abandoned handler's claim until it expires (ledger.OpAbandon), so that the
// slot's next holder does not take the item over at once by its newer token while the handler may
// still be running. Once the lease has ended nothing can be written: the next holder may then
// reclaim the item at once (README says so).
func (p *pass) abandonClaim(wctx context.Context, claim Claim) {
	if p.leaseEnded() {
		return
	}
	if err := p.e.ledger.Abandon(wctx, claim); err != nil && !errors.Is(err, ErrClaimLost) {
		p.w.cfg.Logger.Warn("dynapart: could not mark an abandoned handler's claim; the slot's next holder may take the item over before the claim expires",
			"slot", claim.Slot, "key", ledger.KeyText(claim.Key), "err", err)
	}
}

// interrupted gives back a claim whose handler a shutdown or the lease's end interrupted (or kept
// from starting): not counted, and not acknowledged, so the next holder rescans the item. Once the
// lease has ended nothing is written: the claim stays, and the slot's next holder reclaims it at
// once by its newer token (or it expires).
func (p *pass) interrupted(wctx context.Context, t task, claim Claim, took time.Duration) {
	if p.leaseEnded() {
		return
	}
	if err := p.e.ledger.Release(wctx, claim, p.w.cfg.Clock.Now()); err == nil {
		p.w.stats.released.Add(1)
		p.w.itemEvent(OutcomeReleased, t.key, claim.Slot, claim.Attempt, took)
	}
}

// completed records the outcome of a completion write.
func (p *pass) completed(ctx context.Context, t task, claim Claim, err error, took time.Duration) {
	c := p.w.cfg
	switch {
	case err == nil:
		t.markFinished()
		p.done(ctx, t.key, claim.Slot, claim.Attempt, took)
	case errors.Is(err, ErrClaimLost):
		p.claimLost(claim, err, took)
		c.Logger.Warn("dynapart: claim lost before completion", "slot", claim.Slot, "attempt", claim.Attempt, "err", err)
	case errors.Is(err, ledger.ErrNotSent):
		p.notSent(t, claim, err, took)
	case errors.Is(err, ledger.ErrEffectRefused):
		// The handler's effects cannot be committed (nothing was written): a permanent failure,
		// which the dead letter's line tells with its error.
		p.deadLetter(ctx, t, claim, err.Error(), took)
	case ledger.IsValidation(err):
		// The completion alone is refused for good (the item is near 400 KB): the claim stays
		// until it expires; a later pass meets the item again (a follower's candidate is resolved).
		p.refusedForGood(t, err)
	case refusedForGood(err):
		// Refused before anything was applied, for every item alike (a permission, a table an
		// effect writes): the claim is given back, no attempt used, and the pass stops.
		c.Logger.Error("dynapart: complete", "slot", claim.Slot, "err", err)
		p.stopOnRefusal(err)
		p.interrupted(ctx, t, claim, took)
		p.againKey(t.key, c.Clock.Now())
	default:
		// Unknown outcome: the claim expires and the item is handled again.
		c.Logger.Error("dynapart: complete", "slot", claim.Slot, "err", err)
		p.unknown(claim, took)
	}
}

// notSent handles a completion the write gate (Config.WriteRate) held until its write context
// ended: nothing of it was applied, and the handler's run is not the item's failure, so the claim
// is given back (under a write context of its own, sent at once: ledger.Unqueued) without
// counting an attempt, and the item handled again.
func (p *pass) notSent(t task, claim Claim, err error, took time.Duration) {
	p.w.cfg.Logger.Warn("dynapart: completion not sent within WriteTimeout (the write rate held it); the claim is given back, no attempt counted",
		"slot", claim.Slot, "err", err)
	wctx, cancel := p.writeContext()
	defer cancel()
	p.interrupted(ledger.Unqueued(wctx), t, claim, took) // not behind the queue that held the completion
	p.againKey(t.key, p.w.cfg.Clock.Now())
}

// done counts a completed item; in index mode with the table ledger it also leaves the index.
func (p *pass) done(ctx context.Context, key Key, slot, attempt int, took time.Duration) {
	c := p.w.cfg
	p.w.stats.completed.Add(1)
	p.counts.done.Add(1)
	p.w.itemEvent(OutcomeCompleted, key, slot, attempt, took)
	if c.Mode == scan.ModeIndex && c.Ledger == LedgerTable {
		p.leaveIndex(ctx, key)
	}
}

// claimLost counts a write refused because the claim is no longer current, and asks for another
// pass unless the item is finished: an item found pending, in retry, or claimed by someone else
// (whose claim may end without an outcome) is looked at again, so that a once-job does not end
// with it unfinished.
func (p *pass) claimLost(cl Claim, err error, took time.Duration) {
	p.w.stats.claimLost.Add(1)
	p.w.itemEvent(OutcomeClaimLost, cl.Key, cl.Slot, cl.Attempt, took)
	var lost *ledger.ClaimLostError
	if errors.As(err, &lost) {
		p.againFor(cl.Key, lost.Found)
		return
	}
	p.againKey(cl.Key, p.w.cfg.Clock.Now())
}

// completion is a handled item waiting for its batched completion write.
type completion struct {
	t     task
	claim Claim
	took  time.Duration
}

// completionQueue is how many handled items may wait for a batched completion: Concurrency, and
// at least a full transaction, so that few handlers do not hold the completer to transactions of
// a few items (one round trip each). What waits here is what a crash may make run again.
func completionQueue(concurrency int) int { return max(concurrency, ledger.BatchSize) }

// completer completes handled items in batches of up to 25: it takes what is waiting (at least
// one) and writes it in one transaction, so batches grow with the load and add no delay.
func (p *pass) completer() {
	for first := range p.completions {
		batch := []completion{first}
	fill:
		for len(batch) < ledger.BatchSize {
			select {
			case c, ok := <-p.completions:
				if !ok {
					break fill
				}
				batch = append(batch, c)
			default:
				break fill
			}
		}
		claims := make([]Claim, len(batch))
		for i, b := range batch {
			claims[i] = b.claim
		}
		cctx, cancel := p.writeContext()
		errs := p.e.ledger.CompleteBatch(cctx, claims, p.w.cfg.Clock.Now())
		for i, b := range batch {
			p.completed(cctx, b.t, b.claim, errs[i], b.took)
			b.t.item.Ack()
		}
		cancel()
	}
}

// failed records a failed attempt: a retry with backoff, or a dead letter.
func (p *pass) failed(ctx context.Context, t task, cl Claim, herr error, took time.Duration) {
	c := p.w.cfg
	var pe *PanicError
	if errors.As(herr, &pe) {
		p.w.stats.panics.Add(1)
		c.Logger.Error("dynapart: handler panicked", "slot", cl.Slot, "attempt", cl.Attempt, "panic", pe.Value, "stack", string(pe.Stack))
	}
	permanent, after := classify(herr)
	if permanent || cl.Attempt >= c.MaxAttempts {
		p.deadLetter(ctx, t, cl, herr.Error(), took)
		return
	}
	if after <= 0 {
		after = backoff(c.RetryBackoff, c.MaxRetryBackoff, cl.Attempt)
	}
	at := c.Clock.Now().Add(after)
	err := p.e.ledger.Retry(ctx, cl, herr.Error(), at)
	switch {
	case err == nil:
		p.w.stats.retried.Add(1)
		p.w.itemEvent(OutcomeRetried, cl.Key, cl.Slot, cl.Attempt, took)
		p.againKey(cl.Key, at)
	case errors.Is(err, ErrClaimLost):
		p.claimLost(cl, err, took)
	case ledger.IsValidation(err):
		// The item cannot take the state (near 400 KB): nothing more can be done (a follower's
		// candidate is resolved).
		p.refusedForGood(t, err)
	default:
		c.Logger.Error("dynapart: record retry", "slot", cl.Slot, "err", err)
		p.stopOnRefusal(err)
		p.unknown(cl, took)
	}
}

// deadLetter moves a claimed item to failed.
func (p *pass) deadLetter(ctx context.Context, t task, cl Claim, msg string, took time.Duration) {
	c := p.w.cfg
	err := p.e.ledger.DeadLetter(ctx, cl, msg, c.Clock.Now())
	switch {
	case err == nil:
		p.deadLettered(ctx, cl.Key, cl.Slot, cl.Attempt, took)
		c.Logger.Warn("dynapart: item dead-lettered", "slot", cl.Slot, "attempt", cl.Attempt, "err", msg) // no key: 'dynapart failed' lists them
	case errors.Is(err, ErrClaimLost):
		p.claimLost(cl, err, took)
	case ledger.IsValidation(err):
		// Refused for good, even without its error text: the item cannot take the state (it is
		// near 400 KB). Its claim stays until it expires; a later pass meets the item again (a
		// follower's candidate is resolved).
		p.refusedForGood(t, err)
	default:
		// Unknown outcome: the item is kept for a later pass, which reclaims it once the claim
		// has expired (or finds it failed).
		c.Logger.Error("dynapart: record dead letter; the item will be tried again", "slot", cl.Slot, "err", err)
		p.stopOnRefusal(err)
		p.unknown(cl, took)
	}
}

// unknown reports a claimed item whose outcome write got no answer: it may have landed. The item
// is due again once its claim has expired; that pass finds it finished or claims it again.
func (p *pass) unknown(cl Claim, took time.Duration) {
	p.w.itemEvent(OutcomeUnknown, cl.Key, cl.Slot, cl.Attempt, took)
	p.againKey(cl.Key, cl.Until)
}

// deadLettered counts a dead-lettered item; in index mode it also leaves the index.
func (p *pass) deadLettered(ctx context.Context, key Key, slot, attempt int, took time.Duration) {
	p.w.stats.deadLettered.Add(1)
	p.counts.failed.Add(1)
	p.w.itemEvent(OutcomeDeadLettered, key, slot, attempt, took)
	if p.w.cfg.Mode == scan.ModeIndex {
		p.leaveIndex(ctx, key)
	}
}

// leaveIndex takes a finished item out of the sparse pending index, through the ledger.
func (p *pass) leaveIndex(ctx context.Context, key Key) {
	if err := p.e.ledger.LeaveIndex(ctx, key, p.w.cfg.ShardAttr); err != nil {
		p.w.cfg.Logger.Warn("dynapart: remove the item from the pending index", "err", err)
	}
}
