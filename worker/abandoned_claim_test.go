package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 31, hole 3: a handler that ignores its cancelled context is abandoned at a graceful stop;
// its item is claimed again once its claim expires (README, worker/doc.go), not at once by the
// slot's next holder through its newer lease token while the abandoned handler still runs.
func TestAbandonedHandlersClaimWaitsForExpiry(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 1)
			base := fastTimings(f.config(kind))
			base.Workers, base.ClaimTTL = 1, time.Minute
			base.DrainTimeout, base.HandlerGrace = 50*time.Millisecond, 50*time.Millisecond

			first := base
			first.Owner = "first"
			w1, err := New(first)
			require.NoError(t, err)
			started, stuck := make(chan struct{}, 1), make(chan struct{})
			defer close(stuck)
			ctx1, stop1 := context.WithCancel(context.Background())
			done1 := make(chan error, 1)
			go func() {
				done1 <- w1.Run(ctx1, func(context.Context, Item) error {
					started <- struct{}{}
					<-stuck // ignores its context: abandoned, and still running for the rest of the test
					return nil
				})
			}()
			recvOrFail(t, started, "the first holder's handler")
			stop1() // graceful stop: the drain ends, the handler is abandoned, the slot is released
			require.ErrorIs(t, recvOrFail(t, done1, "the first holder's Run"), context.Canceled)
			require.EqualValues(t, 1, w1.Stats().Abandoned)

			// The slot's next holder (a newer token of the same slot of the same group).
			second := base
			second.Owner = "second"
			events := make(chan ItemEvent, 16)
			second.Hooks.OnItem = func(e ItemEvent) {
				select {
				case events <- e:
				default:
				}
			}
			w2, err := New(second)
			require.NoError(t, err)
			var ran atomic.Int64
			ctx2, stop2 := context.WithCancel(context.Background())
			done2 := make(chan error, 1)
			go func() {
				done2 <- w2.Run(ctx2, func(context.Context, Item) error {
					ran.Add(1)
					return nil
				})
			}()
			e := recvOrFail(t, events, "the next holder's look at the item")
			stop2()
			if err := recvOrFail(t, done2, "the next holder's Run"); !errors.Is(err, context.Canceled) {
				require.NoError(t, err)
			}

			require.Equal(t, OutcomeSkipped, e.Outcome, "the abandoned handler's claim (1m) is live: the next holder must leave it alone")
			require.Zero(t, ran.Load(), "the item's handler ran again while its abandoned handler still runs")
			require.Zero(t, w2.Stats().Claimed)
			st := requireStatus(t, f, kind, itemKey(0), StatusClaimed)
			require.Equal(t, "first", st.Owner, "the abandoned handler's claim is kept until it expires")
		})
	}
}
