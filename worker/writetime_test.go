package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// jumpClock is the system clock moved ahead by what the test adds to jump.
type jumpClock struct{ jump atomic.Int64 }

func (c *jumpClock) Now() time.Time                         { return time.Now().Add(time.Duration(c.jump.Load())) }
func (c *jumpClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (c *jumpClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// A batch of claims that waits out a pause is written with the time after the resume. Batched
// claims, concurrency 2, one scan page: the first two claims' handlers block, the group is paused,
// they finish, and the next batch waits for the resume. The worker's clock then moves on by a
// whole ClaimTTL before the resume: claims timed before the wait would be written already late
// and given back unhandled (tooLate); timed after it, every item is handled on its first claim.
func TestBatchClaimsAfterPauseAreTimedAtTheResume(t *testing.T) {
	const items, conc, ttl = 12, 2, 4 * time.Second
	f := newFixture(t, items)
	ctx := context.Background()
	var started atomic.Int64
	blocked, unblock := make(chan struct{}), make(chan struct{})
	handler := func(hctx context.Context, it Item) error {
		if n := started.Add(1); n <= conc {
			if n == conc {
				close(blocked)
			}
			select {
			case <-unblock:
			case <-hctx.Done():
				return hctx.Err()
			}
		}
		return nil
	}
	clk := &jumpClock{}
	cfg := fastTimings(f.config(LedgerInline))
	cfg.LeaseTTL, cfg.Heartbeat, cfg.ClaimTTL, cfg.Clock = 10*time.Second, time.Second, ttl, clk
	cfg.Workers, cfg.Once, cfg.Concurrency, cfg.BatchClaims, cfg.Segments = 1, true, conc, true, 1
	done := newCompletions()
	var released, laterAttempts atomic.Int64
	cfg.Hooks.OnItem = func(e ItemEvent) {
		done.hook("w")(e)
		switch {
		case e.Outcome == OutcomeReleased:
			released.Add(1)
		case e.Attempt > 1:
			laterAttempts.Add(1)
		}
	}
	w, err := New(cfg)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx, handler) }()
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the first handlers did not start")
	}
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = locks.PauseGroup(ctx, w.Config().Group)
	require.NoError(t, err)
	require.Eventually(t, w.pause.flagged, 20*time.Second, 5*time.Millisecond, "the worker reads the pause flag")
	close(unblock)
	require.Eventually(t, func() bool { return w.pause.waiters() > 0 }, 20*time.Second, 5*time.Millisecond,
		"the next batch waits for the resume")
	require.Eventually(t, func() bool { return done.total.Load() == conc }, 20*time.Second, 5*time.Millisecond,
		"the first batch completes while paused")
	require.Positive(t, w.pause.waiters(), "the next batch still waits")

	clk.jump.Add(int64(ttl))
	_, err = locks.ResumeGroup(ctx, w.Config().Group)
	require.NoError(t, err)
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after the resume")
	}
	require.Equal(t, int64(items), done.total.Load())
	for id, by := range done.by {
		require.Len(t, by, 1, "item %s completed %d times", id, len(by))
	}
	require.Zero(t, released.Load(), "no claim given back for having waited out the pause")
	require.Zero(t, laterAttempts.Load(), "every item handled on its first claim")
}

// A complete-only item's done_at is the time of its write, after the handler: a handler during
// which the worker's clock moves on by an hour leaves done_at an hour after its start, on both
// ledgers (as a claimed item's completion does).
func TestCompleteOnlyDoneAtIsAfterTheHandler(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 1)
			clk := &jumpClock{}
			var key atomic.Pointer[Key]
			var ranAt atomic.Int64
			handler := func(_ context.Context, it Item) error {
				ranAt.Store(clk.Now().UnixMilli())
				key.Store(&it.Key)
				clk.jump.Add(int64(time.Hour))
				return nil
			}
			cfg := fastTimings(f.config(kind))
			cfg.Clock, cfg.Workers, cfg.Once, cfg.CompleteOnly = clk, 1, true, true
			cfg.LeaseTTL, cfg.Heartbeat = 10*time.Second, time.Second
			w, err := New(cfg)
			require.NoError(t, err)
			require.NoError(t, w.Run(context.Background(), handler))
			require.NotNil(t, key.Load(), "the handler ran")
			st, err := f.ledger(t, kind, "").State(context.Background(), *key.Load())
			require.NoError(t, err)
			require.Equal(t, StatusDone, st.Status)
			require.GreaterOrEqual(t, st.DoneAt.UnixMilli(), ranAt.Load()+time.Hour.Milliseconds(),
				"done_at is the write's time, after the handler")
		})
	}
}
