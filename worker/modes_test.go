package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// TestFilterModeMissingAttributeGoesToSlot0: filter mode partitions by an attribute some items
// lack; those belong to partition 0 and are completed by slot 0's worker. All items done once.
func TestFilterModeMissingAttributeGoesToSlot0(t *testing.T) {
	const items = 600
	f := newFixture(t, 0)
	f.seed(t, 0, items, func(i int, it map[string]types.AttributeValue) {
		if i%5 != 0 { // every fifth item has no grp
			it["grp"] = &types.AttributeValueMemberN{Value: strconv.Itoa(i % 7)}
		}
	})
	comp := newCompletions()
	var mu sync.Mutex
	slotOf := map[string]int{}
	var wg sync.WaitGroup
	for i := range 3 {
		owner := "w" + strconv.Itoa(i)
		c := fastTimings(f.config(LedgerInline))
		c.Workers, c.Once, c.Owner = 3, true, owner
		c.Mode, c.PartitionAttr = scan.ModeFilter, "grp"
		c.NoSteal = true // a thief would handle a slot's items under its own slot
		c.Hooks.OnItem = func(e ItemEvent) {
			comp.hook(owner)(e)
			if e.Outcome == OutcomeCompleted {
				mu.Lock()
				slotOf[keyID(e.Key)] = e.Slot
				mu.Unlock()
			}
		}
		w, err := New(c)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, w.Run(context.Background(), func(context.Context, Item) error { return nil }))
		}()
	}
	wg.Wait()
	require.Len(t, comp.by, items)
	for i := range items {
		id := itemKey(i)
		require.Len(t, comp.by[id], 1, id)
		want := 0
		if i%5 != 0 {
			want = (i % 7) % 3
		}
		require.Equal(t, want, slotOf[id], "item %s (grp %d) handled by the wrong slot", id, i%7)
	}
}

// TestFilterModeWarnsOfAnAbsentAttribute: a filter-mode PartitionAttr that no item has (a typo)
// puts every item in partition 0 without a word (helper-68); the worker now warns, once a Run,
// naming the attribute. Where some items have it (TestFilterModeMissingAttributeGoesToSlot0's
// table) it says nothing.
func TestFilterModeWarnsOfAnAbsentAttribute(t *testing.T) {
	f := newFixture(t, 0)
	f.seed(t, 0, 20, func(i int, it map[string]types.AttributeValue) {
		if i < 10 {
			it["grp"] = &types.AttributeValueMemberN{Value: strconv.Itoa(i)}
		}
	})
	for attr, warns := range map[string]bool{"gpr": true, "grp": false} {
		var logs syncBuffer
		c := fastTimings(f.config(LedgerInline))
		c.Workers, c.Once, c.Group = 1, true, "g-"+attr
		c.Mode, c.PartitionAttr = scan.ModeFilter, attr
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		w, err := New(c)
		require.NoError(t, err)
		require.NoError(t, w.Run(context.Background(), func(context.Context, Item) error { return nil }))
		require.Equal(t, warns, strings.Contains(logs.String(), "no item read has the partition attribute"), "%s: %s", attr, logs.String())
		require.Equal(t, warns, strings.Contains(logs.String(), "partition_attr="+attr), attr)
	}
}

// TestIndexModeContinuous: continuous mode over the sparse pending index processes the pending
// rows, and rows marked pending while it runs, once each; it never reads the rows that are not
// pending; finished rows leave the index.
func TestIndexModeContinuous(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	require.NoError(t, scan.CreatePendingIndex(ctx, f.db, f.table, "dp_pending", "dp_shard"))
	f.seed(t, 0, 1000, nil) // old rows, not pending: must never be read
	pending := func(i int, it map[string]types.AttributeValue) { scan.MarkPending(it, "id", "dp_shard", 8) }
	f.seed(t, 1000, 200, pending)

	comp := newCompletions()
	firstBatch, all := make(chan struct{}), make(chan struct{})
	var o1, o2 sync.Once
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Mode, c.Shards = 2, scan.ModeIndex, 8
	c.PollInterval = 100 * time.Millisecond
	c.Hooks.OnItem = func(e ItemEvent) {
		comp.hook("idx")(e)
		if n := comp.total.Load(); n == 200 {
			o1.Do(func() { close(firstBatch) })
		} else if n == 250 {
			o2.Do(func() { close(all) })
		}
	}
	var runs []*Worker
	runCtx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 2)
	for i := range 2 {
		c.Owner = fmt.Sprintf("idx-%d", i) // owners are unique per worker (lock.WithOwner)
		w, err := New(c)
		require.NoError(t, err)
		runs = append(runs, w)
		go func() { errs <- w.Run(runCtx, func(context.Context, Item) error { return nil }) }()
	}
	// A bug must fail the test, not hang it until the package timeout.
	waitOrFail := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case err := <-errs:
			cancel()
			t.Fatalf("a worker returned before %s: %v (completed %d)", what, err, comp.total.Load())
		case <-time.After(2 * time.Minute):
			cancel()
			t.Fatalf("no %s within 2 minutes (completed %d)", what, comp.total.Load())
		}
	}
	waitOrFail(firstBatch, "first 200 completions")
	f.seed(t, 2000, 50, pending) // new work arrives while the workers poll
	waitOrFail(all, "250 completions")
	cancel()
	for range 2 {
		require.ErrorIs(t, <-errs, context.Canceled)
	}
	require.Len(t, comp.by, 250)
	for id, by := range comp.by {
		require.Len(t, by, 1, id)
	}
	var scanned int64
	for _, w := range runs {
		scanned += w.Stats().Scanned
	}
	require.Less(t, scanned, int64(1000), "a poll must read pending rows, not the table")
	out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(f.table), IndexName: aws.String("dp_pending"), Select: types.SelectCount})
	require.NoError(t, err)
	require.Zero(t, out.Count, "done rows leave the pending index")
}

// TestShutdownReleasesClaimsAndSlot: cancelling Run drains handlers for DrainTimeout, releases
// the claims it could not finish (not counted as attempts), saves the checkpoint and releases the
// slot; a second worker then finishes everything, each item once.
func TestShutdownReleasesClaimsAndSlot(t *testing.T) {
	const items = 300
	f := newFixture(t, items)
	comp := newCompletions()
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once, c.Concurrency, c.Owner = 1, true, 4, "first"
	c.DrainTimeout = 100 * time.Millisecond
	c.Hooks.OnItem = comp.hook("first")
	w, err := New(c)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var blocked atomic.Int64
	allBlocked := make(chan struct{})
	var once sync.Once
	err2 := make(chan error, 1)
	go func() {
		err2 <- w.Run(ctx, func(hctx context.Context, it Item) error {
			if comp.total.Load() < 100 {
				return nil
			}
			if blocked.Add(1) == 4 {
				once.Do(func() { close(allBlocked) })
			}
			<-hctx.Done() // a slow handler that respects its context
			return hctx.Err()
		})
	}()
	<-allBlocked
	cancel()
	require.ErrorIs(t, <-err2, context.Canceled)
	s := w.Stats()
	require.EqualValues(t, 4, s.Released, "the 4 interrupted claims are given back")

	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	st, err := locks.GroupStatus(context.Background(), f.table+"/default")
	require.NoError(t, err)
	require.False(t, st.Slots[0].Held, "the slot is released")
	require.NotEmpty(t, st.Slots[0].Checkpoint, "the checkpoint is saved")
	require.False(t, st.Slots[0].Finished)

	c.Owner, c.Hooks.OnItem = "second", comp.hook("second")
	w2, err := New(c)
	require.NoError(t, err)
	require.NoError(t, w2.Run(context.Background(), func(context.Context, Item) error { return nil }))
	require.Len(t, comp.by, items)
	led := f.ledger(t, LedgerInline, "")
	for id, by := range comp.by {
		require.Len(t, by, 1, id)
		st, err := led.State(context.Background(), skey(id))
		require.NoError(t, err)
		require.Equal(t, 1, st.Attempts, "a released claim is not an attempt (%s)", id)
	}
	require.Less(t, w2.Stats().Scanned, int64(items), "the second worker resumes from the checkpoint")
}
