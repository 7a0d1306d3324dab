package work_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestExecTimeoutNegative: a negative --exec-timeout (or DYNAPART_EXEC_TIMEOUT) is bad usage: exit
// 2 naming the flag, nothing written. It used to mean "no timeout" unsaid.
func TestExecTimeoutNegative(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 1)
	work := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none",
		"--exec", "cat >/dev/null"}
	_, stderr, code := c.Run(append(work, "--exec-timeout", "-1s")...)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--exec-timeout")
	_, stderr, code = c.RunEnv(map[string]string{"DYNAPART_EXEC_TIMEOUT": "-5m"}, work...)
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--exec-timeout")
	out, _, _ := c.Run("verify", "--table", table, "--json") // exit 1: not done
	var counts map[string]int
	require.NoError(t, json.Unmarshal([]byte(out), &counts), out)
	require.Equal(t, 1, counts["pending"], "bad usage writes nothing")
}
