package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/clock"
)

// aheadClock is a fake clock read ahead by a fixed skew; it moves with the fake it reads. After
// reports calls for the duration watch (a worker's poll wait) on waits.
type aheadClock struct {
	*clock.Fake
	ahead time.Duration
	watch time.Duration
	waits chan struct{}
}

func (c *aheadClock) Now() time.Time { return c.Fake.Now().Add(c.ahead) }

func (c *aheadClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	if d == c.watch {
		select {
		case c.waits <- struct{}{}:
		default:
		}
	}
	return ch
}

// Issue 31, hole 5: claim expiry with clocks that differ by less than MaxClockSkew. Group A's
// worker claims an item with ClaimTTL 3s (its handler's context is cancelled 0.3s before the
// claim's end, by A's clock); group B's worker, whose clock is 0.9s ahead (MaxClockSkew 1s), looks
// at the item when A's clock reads 2.2s after the claim and its own 3.1s. A's handler still runs
// with a live context: B must not claim the item. Once A's handler has given up, B takes it.
func TestClaimExpiryToleratesClockSkew(t *testing.T) {
	const (
		ttl  = 3 * time.Second
		skew = 900 * time.Millisecond
		poll = 1234 * time.Millisecond // B's pass interval: a wait no other part of B makes
	)
	f := newFixture(t, 1)
	clk := newTestClock()
	base := f.config(LedgerInline)
	base.Workers, base.ClaimTTL, base.MaxClockSkew, base.Concurrency = 1, ttl, time.Second, 1
	base.LeaseTTL, base.Heartbeat = time.Hour, 10*time.Minute

	a := base
	a.Group, a.Owner, a.Clock, a.PollInterval = "holder", "a", clk, time.Hour
	aStarted, aGaveUp, quit := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	var aCtx atomic.Pointer[context.Context]
	aRetried := make(chan struct{}, 1)
	a.Hooks.OnItem = func(e ItemEvent) {
		if e.Outcome == OutcomeRetried {
			aRetried <- struct{}{}
		}
	}
	wa, err := New(a)
	require.NoError(t, err)
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	doneA := make(chan error, 1)
	go func() {
		doneA <- wa.Run(ctxA, func(ctx context.Context, _ Item) error {
			if aCtx.CompareAndSwap(nil, &ctx) {
				aStarted <- struct{}{}
				select {
				case <-ctx.Done(): // works until its context says stop, then stops at once
					aGaveUp <- struct{}{}
					return context.Cause(ctx)
				case <-quit: // the test ends early
					return nil
				}
			}
			return nil
		})
	}()
	recvOrFail(t, aStarted, "A's handler") // A claimed the item at the fake clock's start, T0
	aLive := func() bool { return (*aCtx.Load()).Err() == nil }

	bClock := &aheadClock{Fake: clk, ahead: skew, watch: poll, waits: make(chan struct{}, 4)}
	b := base
	b.Group, b.Owner, b.Clock, b.PollInterval = "other", "b", bClock, poll
	events := make(chan ItemEvent, 16)
	b.Hooks.OnItem = func(e ItemEvent) { events <- e }
	var bOverlap, bRan atomic.Int64
	wb, err := New(b)
	require.NoError(t, err)
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneB := make(chan error, 1)
	go func() {
		doneB <- wb.Run(ctxB, func(context.Context, Item) error {
			bRan.Add(1)
			if aLive() {
				bOverlap.Add(1)
			}
			return nil
		})
	}()
	var stopped sync.Once
	stopAll := func() {
		stopped.Do(func() {
			close(quit)
			stopB()
			stopA()
			for _, done := range []chan error{doneA, doneB} {
				if err := recvOrFail(t, done, "Run"); !errors.Is(err, context.Canceled) {
					require.NoError(t, err)
				}
			}
		})
	}
	defer stopAll()

	// B's first pass (its clock T0+0.9s) finds A's live claim.
	require.Equal(t, OutcomeSkipped, recvOrFail(t, events, "B's first look").Outcome)
	recvOrFail(t, bClock.waits, "B waiting for its next pass")

	// A's clock T0+2.2s, B's T0+3.1s: past the claim's TTL by B's clock, 0.5s before A's handler
	// context is cancelled.
	clk.Advance(2200 * time.Millisecond)
	e := recvOrFail(t, events, "B's second look")
	require.True(t, aLive(), "A's handler context is cancelled 0.3s before the claim's end, by A's clock")
	require.Equal(t, OutcomeSkipped, e.Outcome,
		"B (clock 0.9s ahead, MaxClockSkew 1s) claimed the item while A's handler ran with a live context")
	recvOrFail(t, bClock.waits, "B waiting for its next pass")

	// A's clock T0+2.8s: A's handler context is cancelled; the handler gives up and A records
	// a retry (due about a second later by A's clock).
	clk.Advance(600 * time.Millisecond)
	recvOrFail(t, aGaveUp, "A's handler to see its context cancelled")
	recvOrFail(t, aRetried, "A's retry")

	// A's clock T0+4.8s: B's next pass claims the item and handles it.
	clk.Advance(2 * time.Second)
	for e.Outcome != OutcomeCompleted {
		e = recvOrFail(t, events, "B to complete the item")
	}
	stopAll()
	require.EqualValues(t, 1, bRan.Load())
	require.Zero(t, bOverlap.Load(), "B's handler started while A's handler context was live")
	st := requireStatus(t, f, LedgerInline, itemKey(0), StatusDone)
	require.Equal(t, "b", st.Owner)
}
