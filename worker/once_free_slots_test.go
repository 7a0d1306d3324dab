package worker

import (
	"context"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
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

// TestOnceWorkerLeavesHeldSlots: a slot held by a live worker is left to it: the once-worker
// finishes the free slots, sees the holder renew its lease, and exits 0 while the held slot stays
// unfinished.
func TestOnceWorkerLeavesHeldSlots(t *testing.T) {
	f := newFixture(t, 90)
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once = 3, true
	w, err := New(c)
	require.NoError(t, err)
	// A holder whose lease cannot lapse on a loaded machine (the worker watches it renew before it
	// exits, and would take over a lease that ran out).
	locks, err := lock.New(f.db, f.leaseTable, lock.WithLeaseTTL(20*time.Second), lock.WithHeartbeat(c.Heartbeat))
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

// TestOnceWorkerTakesOverADeadHoldersSlot: two once-workers, two slots, no standby. A takes a slot
// and dies at its first item (deadHolder). B finishes its own slot and finds A's still held, its
// lease not yet run out: B watches it, sees no renewal, takes it over when the lease runs out, and
// does A's share. Before (helper-75), B exited 0 with "every slot is finished or held by a live
// worker" and 93 of 200 items not done, which nobody would ever handle.
func TestOnceWorkerTakesOverADeadHoldersSlot(t *testing.T) {
	f, cfg := deadHolder(t)
	b, err := New(cfg("b"))
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, b, func(context.Context, Item) error { return nil }, 60*time.Second))
	requireTookOverTheDeadHolder(t, f, b)
}

// TestOnceWorkerWatchOutlastsAFailedRead: B's first read of the group in its watch of the dead
// holder is throttled (after the SDK's retries): the watch is tried again, and B still takes the
// slot over. Before (helper-80), B exited 0 "as if they were" alive, the dead holder's share undone.
func TestOnceWorkerWatchOutlastsAFailedRead(t *testing.T) {
	f, cfg := deadHolder(t)
	fc := ddbfault.New(f.db)
	var throttled atomic.Bool
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.QueryInput)
		if aws.ToString(in.TableName) == f.leaseTable && strings.Contains(string(debug.Stack()), "awaitHolders") &&
			throttled.CompareAndSwap(false, true) {
			return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("test: throttled")}
		}
		return send(ctx, in)
	}, ddbfault.OpQuery)
	cb := cfg("b")
	cb.Client = workerClient(fc)
	b, err := New(cb)
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, b, func(context.Context, Item) error { return nil }, 60*time.Second))
	require.True(t, throttled.Load(), "the watch's read was throttled once")
	requireTookOverTheDeadHolder(t, f, b)
}

// deadHolder is a group of two once-worker slots over 200 items of which worker A holds one and
// has died at its first item (its calls fail from then on: no renew, no release, as a SIGKILL
// leaves it), and the config of another worker of the group.
func deadHolder(t *testing.T) (*fixture, func(owner string) Config) {
	f := newFixture(t, 200)
	cfg := func(owner string) Config {
		c := fastTimings(f.config(LedgerInline))
		c.Workers, c.Once, c.Owner, c.Segments = 2, true, owner, 2
		c.LeaseTTL, c.Heartbeat = 8*time.Second, time.Second // A's lease outlives B's own share
		return c
	}
	dbA := newCrashable(f.db)
	ca := cfg("a")
	ca.Client = dbA
	a, err := New(ca)
	require.NoError(t, err)
	aDead := make(chan struct{})
	var once sync.Once
	t.Cleanup(runCrashing(a, func(context.Context, Item) error {
		dbA.dead.Store(true)
		once.Do(func() { close(aDead) })
		return errCrashed
	}))
	<-aDead
	return f, cfg
}

// requireTookOverTheDeadHolder requires that b took the dead holder's slot over and that every
// item is done and the group finished.
func requireTookOverTheDeadHolder(t *testing.T, f *fixture, b *Worker) {
	t.Helper()
	require.EqualValues(t, 1, b.Stats().Takeovers, "B took A's slot over")
	l := f.ledger(t, LedgerInline, "")
	for i := range 200 {
		st, err := l.State(context.Background(), skey(itemKey(i)))
		require.NoError(t, err)
		require.Equal(t, StatusDone, st.Status, "item %d", i)
	}
	finished, err := b.JobFinished(context.Background())
	require.NoError(t, err)
	require.True(t, finished)
}

// watched: a watched slot is free once it is neither held nor finished (its lease ran out, or its
// holder released it unfinished); a holder that renewed (the version moved) or finished is alive.
func TestWatchedSlots(t *testing.T) {
	watch := map[int]int64{0: 5, 1: 5, 2: 5, 3: 5}
	st := &lock.GroupStatus{N: 5, Slots: []lock.SlotStatus{
		{Slot: 0, Version: 5, Held: true},     // not renewed yet: still watched
		{Slot: 1, Version: 6, Held: true},     // renewed: alive
		{Slot: 2, Version: 6, Finished: true}, // finished
		{Slot: 3, Version: 5, Held: true},
		{Slot: 4, Version: 9, Held: true}, // not watched
	}}
	require.False(t, watched(st, watch))
	require.Equal(t, map[int]int64{0: 5, 3: 5}, watch)
	st.Slots[3] = lock.SlotStatus{Slot: 3, Version: 6, Released: true} // released unfinished: free
	require.True(t, watched(st, watch))
	st.Slots[3] = lock.SlotStatus{Slot: 3, Version: 5} // ran out unrenewed: free
	require.True(t, watched(st, map[int]int64{3: 5}))
}
