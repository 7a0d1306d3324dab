package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// TestOnceWorkerFinishesEveryFreeSlot: a single once-worker of a 3-slot group does the whole
// table: after its first slot it takes the other free, unfinished slots before it exits.
func TestOnceWorkerFinishesEveryFreeSlot(t *testing.T) {
	f := newFixture(t, 300)
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once = 3, true
	w, err := New(c)
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string]int{}
	require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error {
		mu.Lock()
		seen[keyID(it.Key)]++
		mu.Unlock()
		return nil
	}, 60*time.Second))
	require.Len(t, seen, 300, "every item handled")
	for id, n := range seen {
		require.Equal(t, 1, n, "item %s handled more than once", id)
	}
	finished, err := w.JobFinished(context.Background())
	require.NoError(t, err)
	require.True(t, finished, "every slot marked finished")
}

// TestOnceWorkerLeavesHeldSlots: a slot held by a live worker is not waited for: the once-worker
// finishes the free slots and exits 0 while the held slot stays unfinished.
func TestOnceWorkerLeavesHeldSlots(t *testing.T) {
	f := newFixture(t, 90)
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once = 3, true
	w, err := New(c)
	require.NoError(t, err)
	locks, err := lock.New(f.db, f.leaseTable, lock.WithLeaseTTL(c.LeaseTTL), lock.WithHeartbeat(c.Heartbeat))
	require.NoError(t, err)
	ctx := context.Background()
	held, err := locks.AcquireSlot(ctx, w.Config().Group, 3, lock.WithGroupMeta(testGroupMeta(w.Config())))
	require.NoError(t, err)
	defer held.Release(ctx)

	slots := map[int]bool{}
	var mu sync.Mutex
	require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error {
		mu.Lock()
		slots[it.Slot] = true
		mu.Unlock()
		return nil
	}, 60*time.Second))
	require.NotContains(t, slots, held.Slot(), "the held slot's items are left to its holder")
	require.Len(t, slots, 2, "both free slots handled")
	st, err := locks.GroupStatus(ctx, w.Config().Group)
	require.NoError(t, err)
	for _, s := range st.Slots {
		require.Equal(t, s.Slot != held.Slot(), s.Finished, "slot %d finished", s.Slot)
	}
}
