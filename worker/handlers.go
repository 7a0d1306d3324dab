package worker

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/dynapart/dynapart/ledger"
)

// This file holds what keeps a claim's clock honest around the handlers: batched claims are made
// only for handlers that can start them soon (claimGate), a batched claim that waited too long
// is given back instead of being counted as a failed attempt (tooLate), and a handler that ignores
// its cancelled context is abandoned after HandlerGrace (runWithGrace) so Run can return.

// claimGate bounds the batched claims whose handlers have not finished: Concurrency (one per
// handler), plus a lookahead of items that, at the handlers' average pace, start within a tenth of
// the claim TTL (at most maxLookahead more; none until a handler time has been seen). A nil gate
// never blocks. Claims made ahead let the next transaction be sent while the handlers work through
// the last one's items. At a crash a claim made ahead repeats no side effect (its handler has not
// run), but the item's next claim counts a second attempt: a worker that crashes again and again
// (a poison item) uses up the attempts of the items it claimed ahead too.
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
	return g.size + int(min(ahead, int64(maxLookahead(g.size))))
}

// maxLookahead caps the claims made ahead of the handlers: Concurrency, and at least two full
// transactions, so that few handlers with fast items are not held to transactions of a few items
// (at concurrency 1 a transaction would carry 2).
func maxLookahead(concurrency int) int { return max(concurrency, 2*ledger.BatchSize) }

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
	return until.Add(-min(ttl/10, maxClaimMargin))
}

// maxClaimMargin caps the margin claimDeadline leaves before a claim expires.
const maxClaimMargin = 5 * time.Second

// giveBackLate releases a batched claim that waited too long: the attempt is not counted and the
// item is handled again on the next pass. Once the lease has ended nothing is written.
func (p *pass) giveBackLate(ctx context.Context, t task) {
	cl := *t.claim
	if p.leaseEnded() {
		return // not acknowledged: the next holder rescans it
	}
	if err := p.e.ledger.Release(ctx, cl, p.w.cfg.Clock.Now()); err == nil {
		p.w.stats.released.Add(1)
		p.w.itemEvent(OutcomeReleased, t.key, cl.Slot, cl.Attempt, 0)
		p.againKey(t.key, p.w.cfg.Clock.Now())
	} else {
		p.againKey(t.key, cl.Until) // unknown: reclaimed once the claim expires
	}
	p.w.cfg.Logger.Warn("dynapart: a batched claim waited too long for a handler; given back", "slot", cl.Slot, "key", ledger.KeyText(t.key))
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

// stoppedBy reports whether the worker's stop interrupted a handler that returned herr: its
// context was cancelled by the drain's end (or the lease's), or it returned ErrStopped while the
// slot is stopping. Such an attempt is released or left, not counted.
func (p *pass) stoppedBy(herr error) bool {
	if p.workCtx.Err() != nil {
		return true
	}
	if !errors.Is(herr, ErrStopped) || !p.stopping() {
		return false
	}
	p.w.cfg.Logger.Info("dynapart: the handler returned ErrStopped as the worker stops: its attempt is not counted",
		"slot", p.lease.Slot(), "err", herr)
	return true
}

// stopping reports whether the slot has begun to stop: Run's context is done, the group was
// resized, or the deadline margin (Config.DeadlineMargin) has been reached.
func (s *slot) stopping() bool {
	return s.runCtx.Err() != nil || s.ctx.Err() != nil || (!s.stopAt.IsZero() && !s.w.cfg.Clock.Now().Before(s.stopAt))
}

// abandoned records a handler given up on. keep (the claim expired, not a shutdown) acknowledges
// the item and asks for another pass once the claim has expired; otherwise the item is left
// unacknowledged for the next holder.
func (p *pass) abandoned(t task, until time.Time, keep bool) {
	p.w.stats.abandoned.Add(1)
	p.w.itemEvent(OutcomeAbandoned, t.key, p.lease.Slot(), 0, 0)
	p.w.cfg.Logger.Error("dynapart: a handler ignored its cancelled context past HandlerGrace; abandoned (its goroutine is left running, the item will be claimed again)",
		"slot", p.lease.Slot(), "key", ledger.KeyText(t.key), "grace", p.w.cfg.HandlerGrace)
	if keep {
		p.againKey(t.key, until)
		t.item.Ack()
	}
}

// claimContext cancels with ErrClaimExpiring at the given time by the worker's clock.
func (w *Worker) claimContext(parent context.Context, at time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	d := at.Sub(w.cfg.Clock.Now())
	if d <= 0 {
		cancel(ErrClaimExpiring)
		return ctx, func() { cancel(nil) }
	}
	stop := w.cfg.Clock.AfterFunc(d, func() { cancel(ErrClaimExpiring) })
	return ctx, func() { stop(); cancel(nil) }
}

func runHandler(ctx context.Context, h Handler, item Item) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return h(ctx, item)
}

// backoff is base * 2^(attempt-1) with +-20% jitter, at most limit.
func backoff(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		if d > limit/2 {
			d = limit // doubling would pass the limit (or overflow)
			break
		}
		d *= 2
	}
	d = min(d, limit)
	f := float64(d) * (0.8 + rand.Float64()*0.4) // ±20% jitter
	if f >= math.MaxInt64 {
		return math.MaxInt64 // d + 20% of a limit near the largest Duration
	}
	return max(time.Duration(f), 0)
}
