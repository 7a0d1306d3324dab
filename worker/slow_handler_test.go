package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ledger"
)

// TestHandlerLongerThanWriteTimeout: WriteTimeout bounds each write, not the handler before it. A
// handler that runs longer than WriteTimeout (well inside its claim) completes its item after one
// run, its effects with it, in claim and in complete-only mode (the outcome write was sent with a
// context that had started before the handler, and had expired: the item stayed claimed, or was
// handled again and again).
func TestHandlerLongerThanWriteTimeout(t *testing.T) {
	for _, mode := range []string{"claim", "complete-only"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, 2)
			c := fastTimings(f.config(LedgerInline))
			c.Workers, c.Once, c.Concurrency = 1, true, 2
			c.CompleteOnly = mode == "complete-only"
			c.ClaimTTL, c.WriteTimeout = 10*time.Second, 300*time.Millisecond
			w, err := New(c)
			require.NoError(t, err)
			var runs atomic.Int64
			h := WithEffects(func(ctx context.Context, it Item) (*Effects, error) {
				runs.Add(1)
				select { // slow work, three times WriteTimeout
				case <-time.After(3 * c.WriteTimeout):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return (&Effects{}).Item(ledger.Add("runs", 1)), nil
			})
			require.NoError(t, runOnceWithin(t, w, h, time.Minute))
			s, err := f.ledger(t, LedgerInline, "").Summarize(context.Background())
			require.NoError(t, err)
			require.EqualValues(t, 2, s.Done)
			require.EqualValues(t, 2, runs.Load(), "one run per item")
		})
	}
}
