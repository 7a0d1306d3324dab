package work_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestWorkFollowNeedsAStream: `work --follow` on a table without a stream stops with exit 2 before
// taking a slot, naming the table and the command that turns the stream on; --follow with --once
// is refused by name; after `init --stream` the same worker starts (its dry run reads the share).
func TestWorkFollowNeedsAStream(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 20)
	_, stderr, code := c.Run("work", "--table", table, "--lease-table", leases, "--workers", "1", "--follow")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--follow")
	require.Contains(t, stderr, "init --table "+table+" --stream")
	_, stderr, code = c.Run("status", "--group", table+"/default", "--lease-table", leases)
	require.Equal(t, 2, code, "no slot taken, the group not created: %s", stderr)
	require.Contains(t, stderr, "does not exist")

	_, stderr, code = c.Run("work", "--table", table, "--lease-table", leases, "--workers", "1", "--follow", "--once")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--follow")
	require.Contains(t, stderr, "--once")

	c.MustRun("init", "--table", table, "--lease-table", leases, "--stream")
	out := c.MustRun("work", "--table", table, "--lease-table", leases, "--workers", "1", "--follow", "--dry-run")
	require.Regexp(t, `(?m)^all +20 +20 `, out, "the dry run reads the share: %s", out)
}
