package work_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestWorkDryRunFinishedGroup: items added to a table whose once-group is finished are not
// processed by a --once run of that group, and its dry run says so (naming --group for a new
// group) instead of promising them; a dry run of a new group does not.
func TestWorkDryRunFinishedGroup(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 5)
	c.WorkOnce(table, leases, 1)
	c.MustRun("seed", "--table", table, "--start", "5", "--items", "3")

	out := c.MustRun("work", "--table", table, "--lease-table", leases, "--once", "--dry-run")
	require.Contains(t, out, `group "`+table+`/default" is finished: a --once run of it processes nothing`)
	require.Contains(t, out, "--group "+table+"/redo --workers 1")
	require.Contains(t, out, "estimated cost of a run of a new --group:")
	require.NotContains(t, out, "estimated cost of the job")

	_, stderr, code := c.Run("work", "--table", table, "--lease-table", leases, "--once", "--exec", "true", "--progress", "none")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "nothing to do", "the run does what the dry run said")

	out = c.MustRun("work", "--table", table, "--lease-table", leases, "--once", "--dry-run", "--group", table+"/redo", "--workers", "1")
	require.NotContains(t, out, "is finished")
	require.Contains(t, out, "estimated cost of the job:")
	require.Regexp(t, `(?m)^all\s+3\s+8\s+5\s+0\s`, out)
}
