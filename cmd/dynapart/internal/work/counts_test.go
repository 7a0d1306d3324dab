package work_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// A count of one reads in the singular in what the commands write: the worker's end line said
// "1 items dead-lettered", failed "1 failed items", verify "1 of 1 items are not done".
func TestCountOfOneIsSingular(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 1)
	_, stderr, code := c.Run("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none",
		"--exec", "exit 65")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "dynapart: 1 item dead-lettered by this worker:")
	_, stderr, code = c.Run("failed", "--table", table)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "1 failed item\n", stderr)
	_, stderr, code = c.Run("verify", "--table", table)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "1 of 1 item is not done")
}
