package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 31, hole 2: group A claims every item and is still handling them (claim TTL 1m) when
// group B starts on the same table with CompleteOnly. A worker of another group leaves a live
// claim alone until it expires (README), so B must handle none of A's items, and each item is
// handled once and counted completed once, by A.
func TestCompleteOnlyLeavesLiveClaimsOfAnotherGroup(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 10
			f := newFixture(t, n)
			var mu sync.Mutex
			handledBy := map[string][]string{}
			handle := func(group string, id string) {
				mu.Lock()
				handledBy[id] = append(handledBy[id], group)
				mu.Unlock()
			}

			a := fastTimings(f.config(kind))
			a.Group, a.Owner, a.Workers, a.Once, a.Concurrency, a.ClaimTTL = "claimers", "a", 1, true, n, time.Minute
			a.Segments, a.SubSegments = 1, 1 // one page holds every item: all are claimed before any is done
			holding, release := make(chan struct{}, n), make(chan struct{})
			wa, err := New(a)
			require.NoError(t, err)
			aDone := make(chan error, 1)
			go func() {
				aDone <- wa.Run(context.Background(), func(ctx context.Context, it Item) error {
					handle("A", keyID(it.Key))
					holding <- struct{}{}
					select {
					case <-release:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
			}()
			for range n {
				recvOrFail(t, holding, "A's handlers to hold every item")
			}

			// B has looked at every item once A holds them all: skipped (or, the hole, handled).
			looked := make(chan string, 4*n)
			b := fastTimings(f.config(kind))
			b.Group, b.Owner, b.Workers, b.Once, b.CompleteOnly = "complete-only", "b", 1, true, true
			b.Hooks.OnItem = func(e ItemEvent) {
				if e.Outcome == OutcomeSkipped || e.Outcome == OutcomeCompleted {
					select {
					case looked <- keyID(e.Key):
					default:
					}
				}
			}
			wb, err := New(b)
			require.NoError(t, err)
			bDone := make(chan error, 1)
			go func() {
				bDone <- wb.Run(context.Background(), func(_ context.Context, it Item) error {
					handle("B", keyID(it.Key))
					return nil
				})
			}()
			seen := map[string]bool{}
			for len(seen) < n {
				seen[recvOrFail(t, looked, "B to look at every item")] = true
			}

			close(release)
			require.NoError(t, recvOrFail(t, aDone, "A's Run"))
			require.NoError(t, recvOrFail(t, bDone, "B's Run (once A's items are done)"))

			mu.Lock()
			defer mu.Unlock()
			for i := range n {
				require.Equal(t, []string{"A"}, handledBy[itemKey(i)], "item %d: handled by A alone (A's claim was live)", i)
				requireStatus(t, f, kind, itemKey(i), StatusDone)
			}
			require.EqualValues(t, n, wa.Stats().Completed, "A completed every item")
			require.Zero(t, wb.Stats().Completed, "B completed none")
		})
	}
}
