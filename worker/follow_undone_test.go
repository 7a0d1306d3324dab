package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
)

// TestFollowChangeUndoneNotHandledTwice (from an adversarial review): an item done at n=0 is
// changed to n=100 and back to n=0 before the follower reads the records (its reader is behind,
// one record a page). The first record's image (done at n=0's version, content n=100) makes the
// worker reopen the item; the claim returns the content as it is now, n=0: the version handled
// and still recorded as handled last. The handler ran on it a second time; now the item is done
// again without it (counted as skipped). The inline ledger only: the table ledger reads the item
// before it reopens it.
func TestFollowChangeUndoneNotHandledTwice(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(context.Background(), f.db, f.table)
			require.NoError(t, err)
			f.seed(t, 0, 1, nil)
			gs := newReviewStreams(t, false, 1)
			runs := newReviewRuns()
			w := startReview(t, f, kind, "A", gs, nil, runs.handler("A"))
			gs.following(t) // the pass handled n=0; the reader waits
			reviewWait(t, 30*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, kind, itemKey(0)) })
			setN(t, f, 0, 100)
			setN(t, f, 0, 0)
			f.seed(t, 1, 1, nil) // a marker after them
			close(gs.open)
			// The marker handled and no record unresolved (Lag is the oldest unresolved record's):
			// the records of item 0 before it are resolved.
			reviewWait(t, 60*time.Second, func() (bool, string) {
				fs := w.Stats().Follow
				return len(runs.of(itemKey(1))) == 1 && fs.Lag == 0, fmt.Sprintf("the records resolved: %+v", fs)
			})
			require.Len(t, runs.of(itemKey(0)), 1, "n=0, the version handled, was handled again: runs %v", runs.of(itemKey(0)))
			ok, why := reviewDoneAtCurrent(t, f, kind, itemKey(0))
			require.True(t, ok, why)
		})
	}
}
