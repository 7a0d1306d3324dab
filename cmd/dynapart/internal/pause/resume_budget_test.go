package pause_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

// TestResumeLeavingTheBudgetReachedRefused: a group paused at its WCU budget (20 used of 10). A
// resume that would leave it there (no budget given, an RCU budget only, or --max-wcu equal to what
// was used) exits 2 naming the figures and writes nothing; its workers would pause it again at
// once (helper-76, helper-80: each of these resumed it). --max-wcu 30 raises it and resumes.
func TestResumeLeavingTheBudgetReachedRefused(t *testing.T) {
	ctx := context.Background()
	const group = "g/budget"
	c, lc, leases := groupWithBudget(t, group)
	_, err := lc.AddUsage(ctx, group, 20, 5)
	require.NoError(t, err)
	paused, err := lc.PauseForBudget(ctx, group)
	require.NoError(t, err)
	require.True(t, paused)

	resume := []string{"resume", "--group", group, "--lease-table", leases}
	for _, flags := range [][]string{nil, {"--max-rcu", "1000"}, {"--max-wcu", "20"}} {
		_, stderr, code := c.Run(append(resume, flags...)...)
		require.Equal(t, 2, code, "%v: %s", flags, stderr)
		require.Contains(t, stderr, "would still be at its budget (20.0 of ")
		st, err := lc.GroupState(ctx, group)
		require.NoError(t, err)
		require.True(t, st.Paused, "%v: nothing written", flags)
		require.Equal(t, lock.Budget{MaxWCU: 10, UsedWCU: 20, UsedRCU: 5}, st.Budget, "%v: nothing written", flags)
	}
	out := c.MustRun(append(resume, "--max-wcu", "30")...)
	require.Contains(t, out, "resumed")
	st, err := lc.GroupState(ctx, group)
	require.NoError(t, err)
	require.False(t, st.Paused)
}

// TestResumeBudgetFlagsRefused: a --max-wcu or --max-rcu that is not a finite number above 0 exits
// 2 naming the flag and its value, and the paused group stays paused with its budget as it was.
// --max-wcu 0 used to be taken as no flag (the group resumed without the budget asked for), and
// NaN reached DynamoDB, which refused the write (exit 1, a ValidationException).
func TestResumeBudgetFlagsRefused(t *testing.T) {
	ctx := context.Background()
	const group = "g/flags"
	c, lc, leases := groupWithBudget(t, group)
	_, err := lc.PauseGroup(ctx, group)
	require.NoError(t, err)

	for _, flags := range [][]string{{"--max-wcu", "0"}, {"--max-wcu", "NaN"}, {"--max-rcu", "-1"}, {"--max-rcu", "Inf"}} {
		_, stderr, code := c.Run("resume", "--group", group, "--lease-table", leases, flags[0], flags[1])
		require.Equal(t, 2, code, "%v: %s", flags, stderr)
		require.Contains(t, stderr, flags[0]+" must be a finite number > 0", flags)
		st, err := lc.GroupState(ctx, group)
		require.NoError(t, err)
		require.True(t, st.Paused, "%v: nothing written", flags)
		require.Equal(t, lock.Budget{MaxWCU: 10}, st.Budget, "%v: nothing written", flags)
	}
}

// groupWithBudget makes a lease table with group (one slot, released) and a budget of 10 WCU on
// it, and returns the CLI, a lock client and the table's name.
func groupWithBudget(t *testing.T, group string) (*clitest.CLI, *lock.Client, string) {
	t.Helper()
	ctx := context.Background()
	c := clitest.New(t)
	db := ddbtest.Client(t)
	_, leases := clitest.TableNames(t)
	require.NoError(t, lock.CreateTable(ctx, db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	lc, err := lock.New(db, leases, lock.WithOwner("w"))
	require.NoError(t, err)
	l, err := lc.TryAcquireSlot(ctx, group, 1)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	_, err = lc.SetBudget(ctx, group, lock.Limits{WCU: 10})
	require.NoError(t, err)
	return c, lc, leases
}
