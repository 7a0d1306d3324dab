package worker

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/lock"
)

// claimCounter is a worker's client that counts the claim writes it sends (an update that sets
// the status to claimed, alone or in a transaction) and its reads of the group's pause flag.
type claimCounter struct {
	DynamoDBClient
	claims     atomic.Int64
	pauseReads atomic.Int64
}

func isClaimUpdate(expr *string) bool { return expr != nil && strings.Contains(*expr, "= :claimed") }

func newClaimCounter(db ddbfault.Next) *claimCounter {
	fc := ddbfault.New(db)
	c := &claimCounter{DynamoDBClient: workerClient(fc)}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		switch in := call.In.(type) {
		case *dynamodb.UpdateItemInput:
			if isClaimUpdate(in.UpdateExpression) {
				c.claims.Add(1)
			}
		case *dynamodb.TransactWriteItemsInput:
			for _, it := range in.TransactItems {
				if it.Update != nil && isClaimUpdate(it.Update.UpdateExpression) {
					c.claims.Add(1)
				}
			}
		case *dynamodb.BatchExecuteStatementInput:
			for _, st := range in.Statements {
				if isClaimStatement(st) {
					c.claims.Add(1)
				}
			}
		case *dynamodb.GetItemInput:
			if sk, ok := in.Key["sk"].(*types.AttributeValueMemberN); ok && sk.Value == "-1" {
				c.pauseReads.Add(1)
			}
		}
		return send(ctx, call.In)
	}, ddbfault.OpUpdateItem, ddbfault.OpTransactWriteItems, ddbfault.OpBatchExecuteStatement, ddbfault.OpGetItem)
	return c
}

// TestPauseResume pauses a group mid-run: within about one heartbeat every worker reports itself
// paused, and from then on no claim is written while the workers keep their slots (same owner and
// token, renewed) and status says paused. After the resume every item is done exactly once, the
// passes go on from where they stopped (nothing scanned twice), and the counts saved with the
// checkpoints match what was processed.
func TestPauseResume(t *testing.T) {
	variants := []struct {
		kind  LedgerKind
		batch bool
	}{{LedgerInline, false}, {LedgerTable, true}}
	for _, v := range variants {
		name := string(v.kind)
		if v.batch {
			name += "-batched"
		}
		t.Run(name, func(t *testing.T) { testPauseResume(t, v.kind, v.batch) })
	}
}

func testPauseResume(t *testing.T, kind LedgerKind, batch bool) {
	const items, workers, free = 300, 2, 10
	f := newFixture(t, items)
	ctx := context.Background()
	done := newCompletions()
	var started atomic.Int64
	blocked := make(chan struct{})
	unblock := make(chan struct{})
	handler := func(hctx context.Context, it Item) error {
		n := started.Add(1)
		if n <= free {
			return nil
		}
		if n == free+1 {
			close(blocked)
		}
		select { // the items in flight at the pause
		case <-unblock:
		case <-hctx.Done():
			return hctx.Err()
		}
		return nil
	}
	counters := make([]*claimCounter, workers)
	ws := make([]*Worker, workers)
	errs := make(chan error, workers)
	for i := range workers {
		counters[i] = newClaimCounter(f.db)
		cfg := fastTimings(f.config(kind))
		// Leases long enough that none is lost on a loaded machine: the counts are exact only
		// without a takeover.
		cfg.LeaseTTL, cfg.Heartbeat = 6*time.Second, time.Second
		cfg.Client = counters[i]
		cfg.Workers, cfg.Once, cfg.Concurrency, cfg.BatchClaims = workers, true, 4, batch
		cfg.Owner = "w" + string(rune('1'+i))
		cfg.Hooks.OnItem = done.hook(cfg.Owner)
		w, err := New(cfg)
		require.NoError(t, err)
		ws[i] = w
		go func() { errs <- w.Run(ctx, handler) }()
	}
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("no handler started")
	}
	require.Eventually(t, func() bool {
		return ws[0].Stats().State == StateWorking && ws[1].Stats().State == StateWorking
	}, 10*time.Second, 10*time.Millisecond)

	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	group := ws[0].Config().Group
	before, err := locks.GroupStatus(ctx, group)
	require.NoError(t, err)
	changed, err := locks.PauseGroup(ctx, group)
	require.NoError(t, err)
	require.True(t, changed)
	pausedAt := time.Now()
	// The handlers in flight finish once both workers have read the flag: released earlier, a
	// fast machine processes the whole share before the next heartbeat reads it.
	require.Eventually(t, func() bool { return ws[0].pause.flagged() && ws[1].pause.flagged() },
		20*time.Second, 5*time.Millisecond, "every worker reads the pause flag")
	close(unblock) // handlers in flight finish
	heartbeat := ws[0].Config().Heartbeat
	require.Eventually(t, func() bool { return ws[0].Stats().Paused && ws[1].Stats().Paused },
		20*time.Second, 5*time.Millisecond, "every worker reports itself paused")
	took := time.Since(pausedAt)
	// One heartbeat plus a read and the claim writes in flight (slack for a loaded machine).
	require.Less(t, took, heartbeat+2*time.Second, "paused within about one heartbeat")
	t.Logf("paused after %s (heartbeat %s); flags seen after %s and %s", took, heartbeat,
		ws[0].pause.since.Sub(pausedAt), ws[1].pause.since.Sub(pausedAt))

	claimsAtPause := []int64{counters[0].claims.Load(), counters[1].claims.Load()}
	// Two more heartbeats of each worker, seen as two more reads of the pause flag.
	reads := []int64{counters[0].pauseReads.Load(), counters[1].pauseReads.Load()}
	require.Eventually(t, func() bool {
		return counters[0].pauseReads.Load() >= reads[0]+2 && counters[1].pauseReads.Load() >= reads[1]+2
	}, 10*time.Second, 10*time.Millisecond)
	for i := range workers {
		require.Equal(t, claimsAtPause[i], counters[i].claims.Load(), "worker %d claimed while paused", i)
		require.True(t, ws[i].Stats().Paused)
		require.Equal(t, StateWorking, ws[i].Stats().State, "a paused worker keeps its slot")
	}
	st, err := locks.GroupStatus(ctx, group)
	require.NoError(t, err)
	require.True(t, st.Paused)
	for i, s := range st.Slots {
		require.True(t, s.Held, "slot %d held while paused", i)
		require.False(t, s.Finished, "slot %d not finished while paused", i)
		require.Equal(t, before.Slots[i].Owner, s.Owner)
		require.Equal(t, before.Slots[i].Token, s.Token)
		require.Greater(t, s.Version, before.Slots[i].Version, "heartbeats go on")
	}
	sum, err := f.ledger(t, kind, "").Summarize(ctx)
	require.NoError(t, err)
	require.Zero(t, sum.Claimed, "nothing in flight while paused")
	require.Less(t, sum.Done, int64(items), "paused mid-run")

	changed, err = locks.ResumeGroup(ctx, group)
	require.NoError(t, err)
	require.True(t, changed)
	for range workers {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Fatal("workers did not finish after the resume")
		}
	}
	require.Equal(t, int64(items), done.total.Load())
	for id, by := range done.by {
		require.Len(t, by, 1, "item %s completed %d times", id, len(by))
	}
	sum, err = f.ledger(t, kind, "").Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(items), sum.Done)

	// The counts saved with the checkpoints: every item done once, each read once.
	st, err = locks.GroupStatus(ctx, group)
	require.NoError(t, err)
	var total SlotProgress
	for _, s := range st.Slots {
		require.True(t, s.Finished)
		p, err := ParseSlotProgress(s.Checkpoint)
		require.NoError(t, err)
		total.Done += p.Done
		total.Failed += p.Failed
		total.Scanned += p.Scanned
		require.Positive(t, p.Elapsed)
	}
	for _, w := range ws {
		require.Equal(t, int64(1), w.Stats().Leases, "no lease lost: %+v", w.Stats())
	}
	require.Equal(t, int64(items), total.Done)
	require.Zero(t, total.Failed)
	require.Equal(t, int64(items), total.Scanned, "nothing read again after the resume")
	var scanned int64
	for _, w := range ws {
		scanned += w.Stats().Scanned
	}
	require.Equal(t, int64(items), scanned)
}

// TestPausedOnceWorkerDoesNotFinish: a once-worker whose last items finish while the group is
// paused does not mark its slot finished until the resume.
func TestPausedOnceWorkerDoesNotFinish(t *testing.T) {
	const items = 4
	f := newFixture(t, items)
	ctx := context.Background()
	var started atomic.Int64
	all := make(chan struct{})
	unblock := make(chan struct{})
	handler := func(hctx context.Context, it Item) error {
		if started.Add(1) == items {
			close(all)
		}
		select {
		case <-unblock:
			return nil
		case <-hctx.Done():
			return hctx.Err()
		}
	}
	counter := newClaimCounter(f.db)
	cfg := fastTimings(f.config(LedgerInline))
	cfg.LeaseTTL, cfg.Heartbeat = 6*time.Second, time.Second
	cfg.Client, cfg.Workers, cfg.Once, cfg.Concurrency = counter, 1, true, items
	done := newCompletions()
	cfg.Hooks.OnItem = done.hook("w")
	w, err := New(cfg)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx, handler) }()
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatal("the handlers did not start")
	}
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	group := w.Config().Group
	_, err = locks.PauseGroup(ctx, group)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.Stats().Paused }, 10*time.Second, 5*time.Millisecond)
	close(unblock)
	require.Eventually(t, func() bool { return done.total.Load() == items }, 10*time.Second, 5*time.Millisecond)
	reads := counter.pauseReads.Load()
	require.Eventually(t, func() bool { return counter.pauseReads.Load() >= reads+2 }, 10*time.Second, 10*time.Millisecond)
	st, err := locks.GroupStatus(ctx, group)
	require.NoError(t, err)
	require.False(t, st.Slots[0].Finished, "not finished while paused")
	require.True(t, st.Slots[0].Held)
	select {
	case err := <-errc:
		t.Fatalf("Run returned while paused: %v", err)
	default:
	}

	_, err = locks.ResumeGroup(ctx, group)
	require.NoError(t, err)
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the resume")
	}
	st, err = locks.GroupStatus(ctx, group)
	require.NoError(t, err)
	require.True(t, st.Slots[0].Finished)
	require.Equal(t, int64(items), counter.claims.Load(), "each item claimed once")
}

// A read of the group's meta item that comes back after a later one does not overwrite what the
// later one found: the slot's first read (leasePlan) may be slower than the watch's next one.
func TestPauseReadsApplyInOrder(t *testing.T) {
	p := newPauseState()
	now := time.Now()
	first, second := p.nextRead(), p.nextRead()
	require.True(t, p.setRead(second, true, now), "the later read pauses")
	require.False(t, p.setRead(first, false, now), "the earlier read, answered last, is ignored")
	require.True(t, p.flagged())
	third := p.nextRead()
	require.True(t, p.setRead(third, false, now.Add(time.Second)), "a newer read resumes")
	require.False(t, p.flagged())
}
