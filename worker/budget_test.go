package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// A worker that joins a group whose budget another worker recorded, and ends before its first
// read of the group (a short --once run under a long heartbeat), reports its consumption at the
// end: it reads the group, finds the budget, and adds what it consumed. Before, its report at the
// end sent nothing, as it had never seen a budget: the group's figure missed the whole run
// (helper-76: 1,498 of 3,000 WCU).
func TestWorkerReportsToABudgetItNeverRead(t *testing.T) {
	f := newFixture(t, 40)
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once = 1, true
	c.LeaseTTL, c.Heartbeat = 30*time.Second, 10*time.Second // no read of the group during the run
	w, err := New(c)
	require.NoError(t, err)
	group := w.Config().Group
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	ctx := context.Background()
	held, err := locks.AcquireSlot(ctx, group, 1, lock.WithGroupMeta(testGroupMeta(w.Config())))
	require.NoError(t, err)
	require.NoError(t, held.Release(ctx))
	_, err = locks.SetBudget(ctx, group, lock.Limits{WCU: 1e6})
	require.NoError(t, err)

	require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, 30*time.Second))
	require.EqualValues(t, 40, w.Stats().Completed)
	st, err := locks.GroupStatus(ctx, group)
	require.NoError(t, err)
	require.Positive(t, w.Stats().WCU)
	require.InDelta(t, w.Stats().WCU, st.Budget.UsedWCU, 1e-9, "the run's consumption is on the group's budget")
}

// groupReadEvery: a holder reads the group every Heartbeat, or every BudgetInterval when the
// group has a budget and that is shorter (its reports ride on the reads).
func TestGroupReadEveryFollowsTheBudgetInterval(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		budget   bool
		want     time.Duration
	}{
		{time.Second, false, 3 * time.Second},
		{time.Second, true, time.Second},
		{time.Millisecond, true, minGroupRead}, // not a stream of reads (helper-80)
		{5 * time.Second, true, 3 * time.Second},
	} {
		w := &Worker{cfg: Config{Heartbeat: 3 * time.Second, BudgetInterval: tc.interval}}
		w.budget.set = tc.budget
		require.Equal(t, tc.want, w.groupReadEvery(), "interval %s, budget %v", tc.interval, tc.budget)
	}
}
