package worker

import (
	"context"
	"sync"
	"time"

	"github.com/dynapart/dynapart/lock"
)

// This file holds what keeps a claim's clock honest around the handlers: batched claims are made
// only for handlers that can start them soon (claimGate), a batched claim that waited too long
// is given back instead of being counted as a failed attempt (tooLate), and a handler that ignores
// its cancelled context is abandoned after HandlerGrace (runWithGrace) so Run can return.

// claimGate bounds the batched claims whose handlers have not finished: Concurrency (one per
// handler), plus a lookahead of items that, at the handlers' average pace, start within a tenth of
// the claim TTL (at most Concurrency more; none until a handler time has been seen). A nil gate
// never blocks.
type claimGate struct {
	size int           // Concurrency
	ttl  time.Duration // ClaimTTL
	wake chan struct{} // signalled when places are given back

	mu       sync.Mutex
	inFlight int           // claimed, handler not finished
	avg      time.Duration // moving average of handler times, by the worker's clock
}

func newClaimGate(size int, ttl time.Duration) *claimGate {
	return &claimGate{size: size, ttl: ttl, wake: make(chan struct{}, 1)}
}

// limit is how many claims may be unfinished now; g.mu is held.
func (g *claimGate) limit() int {
	if g.avg <= 0 {
		return g.size
	}
	ahead := int64(g.size) * int64(g.ttl/10) / int64(g.avg)
	return g.size + int(min(ahead, int64(g.size)))
}

// take waits until at least one place is free, then takes up to limit of them.
func (g *claimGate) take(ctx context.Context, limit int) (int, error) {
	if g == nil {
		return limit, nil
	}
	for {
		g.mu.Lock()
		if free := g.limit() - g.inFlight; free > 0 {
			n := min(free, limit)
			g.inFlight += n
			g.mu.Unlock()
			return n, nil
		}
		g.mu.Unlock()
		select {
		case <-g.wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// give returns n places to the gate.
func (g *claimGate) give(n int) {
	if g == nil || n == 0 {
		return
	}
	g.mu.Lock()
	g.inFlight -= n
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// observe adds one handler time to the moving average.
func (g *claimGate) observe(d time.Duration) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.avg <= 0 {
		g.avg = d
	} else {
		g.avg += (d - g.avg) / 8
	}
	g.mu.Unlock()
}

// tooLate reports whether a batched claim has less than half its time left before its handler's
// context would be cut (ErrClaimExpiring): starting the handler now would likely cost an attempt
// for work that never had a fair chance.
func (w *Worker) tooLate(cl Claim, now time.Time) bool {
	return claimDeadline(w.cfg.ClaimTTL, cl.Until).Sub(now) < w.cfg.ClaimTTL/2
}

// claimDeadline is when a handler's context is cancelled with ErrClaimExpiring: a margin before
// the claim expires, so the completion write can still land in time.
func claimDeadline(ttl time.Duration, until time.Time) time.Time {
	return until.Add(-min(ttl/10, 5*time.Second))
}

// giveBackLate releases a batched claim that waited too long: the attempt is not counted and the
// item is handled again on the next pass.
func (w *Worker) giveBackLate(ctx context.Context, e *env, t task, ps *passState) {
	cl := *t.claim
	if err := e.ledger.Release(ctx, cl, w.cfg.Clock.Now()); err == nil {
		w.stats.released.Add(1)
		w.itemEvent(OutcomeReleased, t.key, cl.Slot, cl.Attempt, 0)
		ps.again(w.cfg.Clock.Now())
	} else {
		ps.again(cl.Until) // unknown: reclaimed once the claim expires
	}
	w.cfg.Logger.Warn("dynapart: a batched claim waited too long for a handler; given back", "slot", cl.Slot, "key", keyText(t.key))
	t.item.Ack()
}

// runWithGrace runs the handler in its own goroutine and waits for it. A handler still running
// HandlerGrace after its context was cancelled is abandoned: runWithGrace returns abandoned =
// true and leaves the goroutine to end on its own. Run never waits on a handler that ignores its
// context.
func (w *Worker) runWithGrace(ctx context.Context, h Handler, item Item) (err error, abandoned bool) {
	res := make(chan error, 1)
	go func() { res <- runHandler(ctx, h, item) }()
	select {
	case err := <-res:
		return err, false
	case <-ctx.Done():
	}
	select {
	case err := <-res:
		return err, false
	case <-w.cfg.Clock.After(w.cfg.HandlerGrace):
		return nil, true
	}
}

// abandoned records a handler given up on. keep (the claim expired, not a shutdown) acknowledges
// the item and asks for another pass once the claim has expired; otherwise the item is left
// unacknowledged for the next holder.
func (w *Worker) abandoned(t task, lease *lock.Lease, until time.Time, keep bool, ps *passState) {
	w.stats.abandoned.Add(1)
	w.itemEvent(OutcomeAbandoned, t.key, lease.Slot(), 0, 0)
	w.cfg.Logger.Error("dynapart: a handler ignored its cancelled context past HandlerGrace; abandoned (its goroutine is left running, the item will be claimed again)",
		"slot", lease.Slot(), "key", keyText(t.key), "grace", w.cfg.HandlerGrace)
	if keep {
		ps.again(until)
		t.item.Ack()
	}
}
