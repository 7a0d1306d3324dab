package work_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// requireRefused runs work (args for a one-slot --once job over table) with --flag value, then
// with DYNAPART_FLAG=value instead, and requires each to exit 2 with an error naming the flag
// (want, when given, more of it), and table's pending items to be left as they were.
func requireRefused(t *testing.T, c *clitest.CLI, table string, work []string, flag, value, want string) {
	t.Helper()
	pending := func() int {
		out, _, _ := c.Run("verify", "--table", table, "--json") // exit 1 while items are pending
		var counts map[string]int
		require.NoError(t, json.Unmarshal([]byte(out), &counts), out)
		return counts["pending"]
	}
	before := pending()
	env := "DYNAPART_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	for _, run := range []func() (string, string, int){
		func() (string, string, int) { return c.Run(append(work, "--"+flag, value)...) },
		func() (string, string, int) { return c.RunEnv(map[string]string{env: value}, work...) },
	} {
		_, stderr, code := run()
		require.Equal(t, 2, code, "--%s %s: %s", flag, value, stderr)
		require.Contains(t, stderr, "--"+flag)
		require.Contains(t, stderr, want)
	}
	require.Equal(t, before, pending(), "bad usage writes nothing")
}

// A setting the worker refuses at its start (here a lease table that does not exist) exits 2
// naming the flag, before anything is written, and without the end-of-run stats line: nothing ran.
func TestRefusedAtStartTellsNoStats(t *testing.T) {
	c := clitest.New(t)
	table, _ := c.SeededTables(t, 5)
	requireRefused(t, c, table, []string{"work", "--table", table, "--workers", "1", "--once"}, "lease-table", "no-such-lease-table", "does not exist")
	_, stderr, code := c.Run("work", "--table", table, "--workers", "1", "--once", "--lease-table", "no-such-lease-table")
	require.Equal(t, 2, code, stderr)
	require.NotContains(t, stderr, "worker done")
}

// An empty --exec (--exec "$CMD" with CMD unset, or DYNAPART_EXEC="") is bad usage: it used to be
// taken as no --exec, and every item was marked done without a handler.
func TestEmptyExecRefused(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 3)
	work := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none"}
	requireRefused(t, c, table, work, "exec", "", "--exec is empty")
	requireRefused(t, c, table, work, "exec", "  ", "--exec is empty")
}

// A setting given as zero (or "") where worker.Config takes zero for its default is bad usage: it
// ran with the default unsaid (--max-attempts 0 with 5, helper-68; --page-size 0 without
// --read-rate with 1000). A zero that is a setting of its own is taken (--workers 0 joins the
// group at its size, --read-rate 0 is unlimited, --page-size 0 with --read-rate sizes pages by it).
func TestZeroThatMeansTheDefaultRefused(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 2)
	work := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none"}
	for flag, zero := range map[string]string{"max-attempts": "0", "claim-ttl": "0s", "concurrency": "0", "lease-ttl": "0",
		"max-clock-skew": "0s", "mode": "", "job": "", "page-size": "0"} {
		requireRefused(t, c, table, work, flag, zero, "would mean the default")
	}
	requireRefused(t, c, table, append(work, "--read-rate", "0"), "page-size", "0", "would mean the default, 1000")
	// A setting of another mode or ledger than the run's is not looked at: an environment set
	// up for init (DYNAPART_LEDGER_TABLE= creates no ledger table) runs an inline worker.
	_, stderr, code := c.RunEnv(map[string]string{"DYNAPART_LEDGER_TABLE": "", "DYNAPART_SHARDS": "0"},
		"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none")
	require.Equal(t, 0, code, stderr)
	// --page-size 0 with --read-rate is the scan's pages sized to the rate; --read-rate 0 is no limit.
	_, stderr, code = c.Run("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none",
		"--page-size", "0", "--read-rate", "1000")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = c.Run("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none",
		"--read-rate", "0")
	require.Equal(t, 0, code, stderr)
}

// TestComputedDefaultZeroRefused: a setting whose default is computed (worker.Setting.ZeroMeans)
// given as zero is bad usage too, naming what zero would have meant: --poll-interval 0s ran with
// a 30s pause between passes (5s with --once), --heartbeat 0s with lease-ttl/3, --group "" as
// TABLE/JOB, unsaid (helper-83).
func TestComputedDefaultZeroRefused(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 2)
	work := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none"}
	for flag, zero := range map[string]string{"poll-interval": "0s", "heartbeat": "0s", "group": "", "owner": "", "segments": "0"} {
		requireRefused(t, c, table, work, flag, zero, "would mean the default, ")
	}
	requireRefused(t, c, table, work, "poll-interval", "0s", "30s continuous, 5s once")
	requireRefused(t, c, table, append(work, "--mode", "filter"), "partition-attr", "", "the table's partition key")
	// Another mode's setting is not looked at, as above.
	_, stderr, code := c.RunEnv(map[string]string{"DYNAPART_PARTITION_ATTR": ""}, work...)
	require.Equal(t, 0, code, stderr)
}
