package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
)

// dispatch hands a page's items to the handler goroutines, claiming them in batches first when
// BatchClaims is set. Items that need no work are acknowledged at once.
func (p *pass) dispatch(ctx context.Context, page *scan.Page) error {
	c := p.w.cfg
	// Paused: hand nothing on (reading stops once the scanner's pages in flight are full).
	if err := p.w.pause.wait(ctx); err != nil {
		return err
	}
	if err := p.renewChangedRows(ctx, page); err != nil {
		return err
	}
	now := c.Clock.Now()
	todo := make([]task, 0, len(page.Items))
	for _, it := range page.Items {
		p.w.stats.scanned.Add(1)
		p.counts.scanned.Add(1)
		key := keyOf(it.Attrs, p.e.keyAttrs)
		t := task{item: it, key: key}
		if st, ok := p.e.ledger.StateOf(it.Attrs); ok {
			if renewed, current := p.renewIfChanged(key, it.Attrs, st, now); renewed != st {
				st = renewed
				if c.CompleteOnly {
					t.current = current // a claim reads the content as of itself (contentAsClaimed)
				}
				// The state was written or read just now, maybe a retry another worker left due at
				// its own time, after the now read for the page: judge it by the clock read after it.
				now = c.Clock.Now()
			}
			t.fresh, t.seen = st.Status == StatusPending, st.Claim
			if p.prefilter(st, p.seenRequest(key, st, now)) {
				p.notNow(key, st, 0)
				it.Ack()
				continue
			}
			if c.CompleteOnly { // the prefilter was the complete-only check (completeOnlyStates)
				t.attempt, t.checked = st.Attempts+1, true
			}
		}
		todo = append(todo, t)
	}
	if c.CompleteOnly {
		var err error
		if todo, err = p.completeOnlyStates(ctx, todo); err != nil {
			return err
		}
	}
	if !c.BatchClaims {
		_, err := p.send(ctx, todo)
		return err
	}
	// Batched claims: claim only as many items as handlers can start soon (at most 25 in one
	// transaction; see claimGate) and hand them over before claiming more, so a claim's clock
	// does not run while its item waits in the queue.
	for len(todo) > 0 {
		n, err := p.gate.take(ctx, min(ledger.BatchSize, len(todo), claimBatchMost(p.w.cfg)))
		if err != nil {
			return err
		}
		chunk := todo[:n]
		todo = todo[n:]
		if err := p.claimAndSend(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

// claimAndSend claims chunk in one transaction and hands the claimed items to the handlers. The
// chunk holds one gate place per item; the places of items not handed over are given back here.
func (p *pass) claimAndSend(ctx context.Context, chunk []task) error {
	c := p.w.cfg
	// Paused: wait before claiming (the gate places of the chunk are held meanwhile). The claims'
	// time is read after the wait, so a long pause does not leave them written already late.
	if err := p.w.pause.enter(ctx); err != nil {
		p.gate.give(len(chunk))
		return err
	}
	now := c.Clock.Now()
	until := now.Add(c.ClaimTTL)
	reqs := make([]ClaimRequest, len(chunk))
	for i, t := range chunk {
		reqs[i] = p.claimRequest(t.key, now, until)
		reqs[i].Fresh = t.fresh
		reqs[i].Version = p.versionOf(t.item.Attrs, nil)
	}
	// Under the write context, as a single claim (claimOne): a graceful stop cancels ctx, and a
	// batch given up on in flight may land after its undo looked, leaving claims no handler runs.
	// Admitted by ctx: a stop ends a wait for write capacity (WriteRate) before the batch is sent.
	wctx, cancel := p.writeContext()
	outs, err := p.e.ledger.Claim(ledger.WithAdmission(wctx, ctx), reqs)
	cancel()
	p.w.pause.leave()
	if err != nil && ledger.IsValidation(err) {
		// One item of the batch cannot be claimed: claim them one by one to find it.
		p.gate.give(len(chunk))
		_, err := p.send(ctx, chunk)
		return err
	}
	if err != nil {
		p.gate.give(len(chunk))
		return fmt.Errorf("dynapart: claim batch: %w", err)
	}
	var claimed, changed []task
	for i, o := range outs {
		switch {
		case o.Err != nil:
			p.gate.give(1)
			p.unprocessable(chunk[i], o.Err)
		case !o.Claimed:
			p.gate.give(1)
			if p.mayRenew(chunk[i], o.Found) {
				// Reopened and claimed alone by a handler (reopenRefused), after the claimed
				// items are handed over: their claims' clocks run meanwhile.
				found := o.Found
				chunk[i].refused = &found
				changed = append(changed, chunk[i])
				continue
			}
			p.notNow(chunk[i].key, o.Found, 0)
			chunk[i].item.Ack()
		default:
			p.w.stats.claimed.Add(1)
			cl := o.Claim
			chunk[i].claim = &cl
			p.w.itemEvent(OutcomeClaimed, cl.Key, cl.Slot, cl.Attempt, 0)
			claimed = append(claimed, chunk[i])
		}
	}
	if n, err := p.send(ctx, claimed); err != nil {
		p.releaseUnsent(claimed[n:])
		p.gate.give(len(claimed[n:]))
		return err
	}
	_, err = p.send(ctx, changed)
	return err
}

// releaseUnsent gives back claims never handed to a handler; once the lease has ended it writes
// nothing (the claims stay for the slot's next holder, or expire). The releases share one
// WriteTimeout, which bounds a stop that waits on an unreachable DynamoDB.
func (p *pass) releaseUnsent(ts []task) {
	cctx, cancel := p.writeContext()
	defer cancel()
	for _, t := range ts {
		if t.claim != nil && !p.leaseEnded() {
			if err := p.e.ledger.Release(cctx, *t.claim, p.w.cfg.Clock.Now()); err == nil {
				p.w.stats.released.Add(1)
			}
		}
	}
}

// unprocessable reports an item that cannot hold the ledger's state (e.g. the inline ledger's
// attributes would push it past 400 KB): no retry can help. Counted, logged with its key and
// skipped; it stays pending in the ledger, where `dynapart verify` counts it.
func (p *pass) unprocessable(t task, err error) {
	p.refusedForGood(t, err)
	t.item.Ack()
}

// refusedForGood counts t's item unprocessable (a write DynamoDB refuses for good, e.g. near 400
// KB) and resolves it as a follower's candidate: nothing more can be done for it. The caller
// acknowledges it.
func (p *pass) refusedForGood(t task, err error) {
	t.markFinished()
	p.countUnprocessable(t.key, err)
}

// countUnprocessable counts and logs an item whose ledger write DynamoDB refuses for good.
func (p *pass) countUnprocessable(key Key, err error) {
	p.w.stats.unprocessable.Add(1)
	p.w.itemEvent(OutcomeUnprocessable, key, p.lease.Slot(), 0, 0)
	p.w.cfg.Logger.Error("dynapart: an item cannot be claimed and is skipped (too large for the inline ledger? use the table ledger)",
		"slot", p.lease.Slot(), "key", ledger.KeyText(key), "err", err)
}

// notNow accounts for an item left alone because of its state st (as scanned, or the state that
// refused a claim or a complete-only write): counted as skipped, and due again when st says: a
// live claim's expiry or a retry's time (looked at again within PollInterval), never for a
// finished one. A write is refused as pending when the item no longer exists (ClaimOutcome.Found;
// a scanned pending state is never skipped): nothing to do, no other pass; or, for a versioned
// ledger's complete-only write, when it was reset or redriven since the worker saw it (it shows
// another claim id): looked at again at once.
func (p *pass) notNow(key Key, st ItemState, took time.Duration) {
	p.w.stats.skipped.Add(1)
	p.w.itemEvent(OutcomeSkipped, key, p.lease.Slot(), 0, took)
	if st.Status != StatusPending || st.Claim != "" {
		p.againFor(key, st)
	}
}

// againFor asks for another pass when an item in state st may need one (see notNow).
func (p *pass) againFor(key Key, st ItemState) {
	if st.Status.Finished() {
		return
	}
	now := p.w.cfg.Clock.Now()
	due := st.Due()
	if due.IsZero() {
		due = now
	}
	if poll := now.Add(p.w.cfg.PollInterval); due.After(poll) {
		due = poll
	}
	p.againKey(key, due)
}

// prefilter skips, without a write, items whose inline state shows there is nothing to do now:
// the condition of the write the item would get (a claim, or a complete-only write), evaluated on
// the state the scan read. The conditional write stays the judge; this only saves writes.
func (p *pass) prefilter(st ItemState, req ClaimRequest) (skip bool) {
	op := ledger.OpClaim
	switch {
	case p.w.cfg.CompleteOnly:
		op = ledger.OpCompleteOnly
	case st.Status == StatusPending:
		op = ledger.OpClaimFresh
	}
	return !p.e.ledger.Allows(op, st, req)
}

func keyOf(attrs map[string]types.AttributeValue, keyAttrs []string) Key {
	k := make(Key, len(keyAttrs))
	for _, a := range keyAttrs {
		if v, ok := attrs[a]; ok {
			k[a] = v
		}
	}
	return k
}

func (p *pass) claimRequest(key Key, now, until time.Time) ClaimRequest {
	return ClaimRequest{Key: key, Owner: p.w.cfg.Owner, Slot: p.lease.Slot(), Token: p.lease.Token(), Scope: p.w.scope, Now: now, Until: until}
}

// seenRequest is a request at now (no claim time) for an item judged by its state st: what the
// prefilters evaluate, and the complete-only writes send (ClaimRequest.Seen).
func (p *pass) seenRequest(key Key, st ItemState, now time.Time) ClaimRequest {
	r := p.claimRequest(key, now, now)
	r.Seen = st.Claim
	return r
}

// send hands ts to the handler pool in order; n is how many were handed over before ctx ended.
func (p *pass) send(ctx context.Context, ts []task) (n int, err error) {
	for i, t := range ts {
		select {
		case p.tasks <- t:
		case <-ctx.Done():
			return i, ctx.Err()
		}
	}
	return len(ts), nil
}

// claimBatchMost is the most claims one batch makes: BatchSize, or under a write rate
// (Config.WriteRate) as many as the rate lets through in half a WriteTimeout, which bounds the
// batch's write (its wait for capacity included; a transaction's item counts 2 WCU), so that a
// low rate makes smaller batches rather than batches that time out every pass (helper-69).
func claimBatchMost(c Config) int {
	if c.WriteRate <= 0 {
		return ledger.BatchSize
	}
	perItem := 1.0
	if c.TransactionBatches || c.Ledger == LedgerTable {
		perItem = 2
	}
	return max(1, min(ledger.BatchSize, int(c.WriteRate*c.WriteTimeout.Seconds()/2/perItem)))
}
