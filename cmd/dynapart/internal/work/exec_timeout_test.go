package work_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestExecTimeoutNegative: a negative --exec-timeout (or DYNAPART_EXEC_TIMEOUT) is bad usage: exit
// 2 naming the flag, nothing written. It used to mean "no timeout" unsaid.
func TestExecTimeoutNegative(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 1)
	work := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none",
		"--exec", "cat >/dev/null"}
	requireRefused(t, c, table, work, "exec-timeout", "-1s", "")
	requireRefused(t, c, table, work, "exec-timeout", "-5m", "")
}

// TestExecKilledSaysWhy: a CMD killed by --exec-timeout, or as its claim was about to expire, fails
// its attempt with an error that says so, not only "signal: killed" (which the OOM killer gives
// too), with or without --exec-effects.
func TestExecKilledSaysWhy(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	for name, tc := range map[string]struct {
		flags []string
		want  string
	}{
		"exec-timeout":         {[]string{"--exec-timeout", "1s"}, "CMD killed after --exec-timeout 1s (signal: killed"},
		"exec-timeout effects": {[]string{"--exec-timeout", "1s", "--exec-effects"}, "CMD killed after --exec-timeout 1s (signal: killed"},
		"claim":                {[]string{"--claim-ttl", "2s"}, "CMD killed as its claim was about to expire"},
	} {
		t.Run(name, func(t *testing.T) {
			table, leases := c.SeededTables(t, 1)
			start := time.Now()
			c.WorkOnce(table, leases, 1, append([]string{"--exec", "cat >/dev/null; sleep 30", "--max-attempts", "1"}, tc.flags...)...)
			require.Less(t, time.Since(start), 20*time.Second, "CMD was killed")
			it := scanItems(t, db, table)[0]
			require.Equal(t, "failed", strAttr(it["dp_status"]))
			require.Contains(t, strAttr(it["dp_error"]), tc.want)
		})
	}
}
