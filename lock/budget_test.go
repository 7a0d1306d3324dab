package lock

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGroupBudget: a budget is recorded on an existing group only; consumption adds up; the pause
// for the budget lands only once the stored consumption has reached the stored budget and the
// group is not paused, with the reason "budget", which an operator's pause keeps and a resume
// clears; a budget below the consumption is refused with its figures and nothing written.
func TestGroupBudget(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	c, err := New(db, table, WithOwner("w1"))
	require.NoError(t, err)
	_, err = c.SetBudget(ctx, "nope", Limits{WCU: 10})
	require.ErrorIs(t, err, ErrGroupNotFound)
	_, err = c.AddUsage(ctx, "nope", 1, 1)
	require.ErrorIs(t, err, ErrGroupNotFound)
	_, err = c.SetBudget(ctx, "g", Limits{})
	require.Error(t, err, "a budget needs a limit")

	l, err := c.AcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	defer l.Release(ctx)
	st, err := c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.False(t, st.Budget.Set())

	b, err := c.SetBudget(ctx, "g", Limits{WCU: 100})
	require.NoError(t, err)
	require.Equal(t, Budget{MaxWCU: 100}, b)
	b, err = c.AddUsage(ctx, "g", 60.5, 10)
	require.NoError(t, err)
	require.Equal(t, Budget{MaxWCU: 100, UsedWCU: 60.5, UsedRCU: 10}, b)
	require.False(t, b.Reached(), "no RCU budget: RCU never reaches one")
	changed, err := c.PauseForBudget(ctx, "g")
	require.NoError(t, err)
	require.False(t, changed, "not reached: no pause")

	b, err = c.AddUsage(ctx, "g", 40, 0)
	require.NoError(t, err)
	require.True(t, b.Reached())
	changed, err = c.PauseForBudget(ctx, "g")
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = c.PauseForBudget(ctx, "g")
	require.NoError(t, err)
	require.False(t, changed, "paused already")
	st, err = c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, PausedByBudget, st.PausedReason)
	require.Equal(t, 100.5, st.Budget.UsedWCU)
	changed, err = c.PauseGroup(ctx, "g")
	require.NoError(t, err)
	require.False(t, changed)
	gs, err := c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, PausedByBudget, gs.PausedReason, "an operator's pause of a paused group keeps the reason")
	require.Equal(t, st.Budget, gs.Budget)

	_, err = c.SetBudget(ctx, "g", Limits{WCU: 50, RCU: 5})
	var below *BudgetBelowUsageError
	require.ErrorAs(t, err, &below)
	require.Equal(t, 100.5, below.Budget.UsedWCU)
	require.Contains(t, err.Error(), "--max-wcu 50 is below the 100.5 WCU consumed")
	require.Contains(t, err.Error(), "--max-rcu 5 is below the 10 RCU consumed")
	st2, err := c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, st.Budget, st2.Budget, "nothing written")

	b, err = c.SetBudget(ctx, "g", Limits{WCU: 500})
	require.NoError(t, err)
	require.Equal(t, 500.0, b.MaxWCU)
	changed, err = c.ResumeGroup(ctx, "g")
	require.NoError(t, err)
	require.True(t, changed)
	st, err = c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.False(t, st.Paused)
	require.Empty(t, st.PausedReason)
	changed, err = c.PauseGroup(ctx, "g")
	require.NoError(t, err)
	require.True(t, changed)
	st, err = c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, PausedByOperator, st.PausedReason)
}
