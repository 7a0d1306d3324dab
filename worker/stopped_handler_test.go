package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHandlerReturnsErrStopped: a handler error wrapping ErrStopped is an attempt interrupted by
// the shutdown (not counted) only once Run's context is done; before that it is a failed attempt
// like any other. The handler here cancels Run's context itself, as the CLI's --exec does when
// the reader of its stdout has gone, long before DrainTimeout would cancel the handler. Both
// modes.
func TestHandlerReturnsErrStopped(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("completeOnly=%v", completeOnly), func(t *testing.T) {
			f := newFixture(t, 2)
			c := fastTimings(f.config(LedgerInline))
			c.Workers, c.Once, c.Concurrency, c.CompleteOnly = 1, true, 1, completeOnly
			c.DrainTimeout, c.MaxAttempts = time.Minute, 1
			stopped := fmt.Errorf("output gone: %w", ErrStopped)

			// Not stopping: a failed attempt.
			w, err := New(c)
			require.NoError(t, err)
			require.NoError(t, w.Run(context.Background(), func(ctx context.Context, it Item) error { return stopped }))
			require.EqualValues(t, 2, w.Stats().DeadLettered, "ErrStopped while Run goes on is a failed attempt")

			// Stopping: the first item's handler stops the run and returns ErrStopped.
			f2 := newFixture(t, 2)
			c2 := fastTimings(f2.config(LedgerInline))
			c2.Workers, c2.Once, c2.Concurrency, c2.CompleteOnly = 1, true, 1, completeOnly
			c2.DrainTimeout = time.Minute
			w2, err := New(c2)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			start := time.Now()
			err = w2.Run(ctx, func(context.Context, Item) error {
				cancel()
				return stopped
			})
			require.ErrorIs(t, err, context.Canceled)
			require.Less(t, time.Since(start), c2.DrainTimeout, "the handler's return ends the drain, not DrainTimeout")
			s := w2.Stats()
			require.Zero(t, s.Retried+s.DeadLettered, "an interrupted attempt is not a failed one")
			if !completeOnly {
				require.EqualValues(t, 1, s.Released, "its claim is given back")
			}
			require.NoError(t, runToEnd(t, c2))
			led := f2.ledger(t, LedgerInline, "")
			counted := 1 // the claim of the run that completed it
			if completeOnly {
				counted = 0 // a complete-only completion counts no attempt
			}
			for i := range 2 {
				st, err := led.State(context.Background(), skey(itemKey(i)))
				require.NoError(t, err)
				require.Equal(t, StatusDone, st.Status)
				require.Equal(t, counted, st.Attempts, "%s: the interrupted attempt was not counted", itemKey(i))
			}
		})
	}
}

// runToEnd runs a fresh worker of c to the end with a handler that succeeds.
func runToEnd(t *testing.T, c Config) error {
	t.Helper()
	w, err := New(c)
	require.NoError(t, err)
	return w.Run(context.Background(), func(context.Context, Item) error { return nil })
}

// TestHandlerReturnsErrStoppedAtDeadlineMargin: Run's context has a deadline, and the worker stops
// DeadlineMargin before it (Lambda's case: the drain fits in the margin, so Run's context is not
// done while handlers drain). A handler that returns ErrStopped once the margin is reached is
// interrupted too, not a failed attempt. Both modes.
func TestHandlerReturnsErrStoppedAtDeadlineMargin(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("completeOnly=%v", completeOnly), func(t *testing.T) {
			f := newFixture(t, 2)
			c := fastTimings(f.config(LedgerInline))
			c.Workers, c.Once, c.Concurrency, c.CompleteOnly = 1, true, 1, completeOnly
			c.DeadlineMargin, c.DrainTimeout, c.MaxAttempts = 1500*time.Millisecond, time.Second, 1
			w, err := New(c)
			require.NoError(t, err)
			deadline := time.Now().Add(2 * time.Second)
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			stopAt := deadline.Add(-c.DeadlineMargin)
			err = w.Run(ctx, func(context.Context, Item) error {
				<-time.After(time.Until(stopAt) + 20*time.Millisecond) // the margin is what is tested
				return fmt.Errorf("output gone: %w", ErrStopped)
			})
			require.NoError(t, ctx.Err(), "Run returned before its context's deadline (%v)", err)
			s := w.Stats()
			require.Zero(t, s.Retried+s.DeadLettered, "an interrupted attempt is not a failed one")
			require.Zero(t, s.Completed)
			if !completeOnly {
				require.Positive(t, s.Released, "its claim is given back (and any other claim the stop found)")
			}
		})
	}
}
