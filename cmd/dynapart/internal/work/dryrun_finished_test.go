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

// TestWorkDryRunGroupSettingsDiffer: a dry run whose settings differ from the group's (--once on a
// continuous group's, --mode, the ledger's) exits 2 with the error the run would give, naming the
// flag, where it used to print figures for a run that is refused (helper-83).
func TestWorkDryRunGroupSettingsDiffer(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 5)
	c.WorkOnce(table, leases, 1)
	work := []string{"work", "--table", table, "--lease-table", leases, "--dry-run"}
	for flag, args := range map[string][]string{
		"--once":        nil, // continuous, on the once-group
		"--mode":        {"--once", "--mode", "filter"},
		"--attr-prefix": {"--once", "--attr-prefix", "xx_"},
	} {
		_, stderr, code := c.Run(append(work, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, flag+` "`, args)
		require.Contains(t, stderr, `differs from group "`+table+`/default"`, args)
		_, stderr, code = c.Run(append([]string{"work", "--table", table, "--lease-table", leases, "--progress", "none"}, args...)...)
		require.Equal(t, 2, code, "%v: the run is refused alike: %s", args, stderr)
	}
}
