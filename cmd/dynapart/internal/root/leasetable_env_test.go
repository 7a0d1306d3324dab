package root_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestLeaseTableFromEnvNamed: a --lease-table from DYNAPART_LEASE_TABLE naming no table is a usage
// error (exit 2); work names the flag and the variable, but status, pause, resume and scale print
// only `lock: table "…": table does not exist`, naming neither: the command line does not show
// where the table came from.
func TestLeaseTableFromEnvNamed(t *testing.T) {
	c := clitest.New(t)
	env := map[string]string{"DYNAPART_LEASE_TABLE": "review1-no-such-leases"}
	for _, args := range [][]string{{"status", "--group", "g"}, {"pause", "--group", "g"}, {"resume", "--group", "g"},
		{"scale", "--group", "g", "--workers", "2"}} {
		_, stderr, code := c.RunEnv(env, args...)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, "DYNAPART_LEASE_TABLE", "%v", args)
	}
}
