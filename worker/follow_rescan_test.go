package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
)

// TestFollowTrimmedRescansTheWholeTable: in a group of two, the follower whose shard checkpoint
// the stream no longer holds scans the whole table again, not only its share (a shard holds the
// records of every share, and the other slot's reader never meets the loss), then follows again.
func TestFollowTrimmedRescansTheWholeTable(t *testing.T) {
	const n = 40
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	f.seed(t, 0, n, nil)
	runs := newReviewRuns()
	two := func(c *Config) { c.Workers = 2 }
	streams := map[string]*reviewStreams{"A": newReviewStreams(t, true, 0), "B": newReviewStreams(t, true, 0)}
	workers := map[string]*reviewWorker{}
	for _, name := range []string{"A", "B"} {
		workers[name] = startReview(t, f, LedgerInline, name, streams[name], two, func(_ context.Context, it Item) error {
			runs.add(name, it, false)
			return nil
		})
	}
	reviewWait(t, 30*time.Second, func() (bool, string) {
		shards := 0
		for _, w := range workers {
			if fs := w.Stats().Follow; fs != nil {
				shards += len(fs.Shards)
			}
		}
		return shards > 0, "a follower reads the shard"
	})
	f.seed(t, n, 1, nil) // a record after the back-fill: the holder's checkpoint moves past it
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(n))) == 1, "the new item" })
	// The new item may be the other slot's pass's to handle, before the holder's first read: the
	// trim needs a checkpoint to meet (an expiry taken by a first read restarts the shard from its
	// oldest record, and the trim never fires).
	reviewWait(t, 30*time.Second, func() (bool, string) {
		for _, w := range workers {
			if fs := w.Stats().Follow; fs != nil {
				for _, sh := range fs.Shards {
					if sh.Owner != "" && sh.Position != "" {
						return true, ""
					}
				}
			}
		}
		return false, "the shard's holder saved a checkpoint"
	})
	scanned := map[string]int64{}
	for name, w := range workers {
		scanned[name] = w.Stats().Scanned
		streams[name].trim.Store(true)
		streams[name].expire.Store(true)
	}
	var rescanner string
	reviewWait(t, 30*time.Second, func() (bool, string) {
		for name, w := range workers {
			if st := w.Stats(); st.Follow.Rescans > 0 && st.Scanned-scanned[name] >= n+1 {
				rescanner = name
				return true, ""
			}
		}
		return false, fmt.Sprintf("A %+v, B %+v", workers["A"].Stats().Follow, workers["B"].Stats().Follow)
	})
	st := workers[rescanner].Stats()
	require.EqualValues(t, n+1, st.Scanned-scanned[rescanner], "the whole table, not the slot's share")
	for i := range n + 1 {
		require.Len(t, runs.of(itemKey(i)), 1, "%s: a rescan handles only changed items", itemKey(i))
	}
}
