package redrive_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestRedriveCommand dead-letters every item of a small table (the handler exits 65), then moves
// them back with `redrive`, by key and all at once, on both ledgers.
func TestRedriveCommand(t *testing.T) {
	for _, ledger := range []string{"inline", "table"} {
		t.Run(ledger, func(t *testing.T) {
			t.Parallel()
			c := clitest.New(t)
			db := ddbtest.Client(t)
			table := ddbtest.TableName(t, "")
			leases := ddbtest.TableName(t, "lease")
			ledgerTable := ddbtest.TableName(t, "ledger")
			for _, n := range []string{table, leases, ledgerTable} {
				ddbtest.DeleteOnCleanup(t, db, n)
			}
			c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases, "--ledger-table", ledgerTable)
			c.MustRun("seed", "--table", table, "--items", "10")
			lf := []string{"--table", table, "--ledger", ledger, "--ledger-table", ledgerTable}
			c.MustRun(append([]string{"work", "--lease-table", leases, "--workers", "1", "--once",
				"--exec", "exit 65", "--progress", "none", "--poll-interval", "100ms"}, lf...)...)
			counts := func() map[string]int {
				out, _, _ := c.Run(append([]string{"verify", "--json"}, lf...)...)
				var s map[string]int
				require.NoError(t, json.Unmarshal([]byte(out), &s), out)
				return s
			}
			require.Equal(t, 10, counts()["failed"])

			// Bad input: exit 2, nothing written.
			for _, bad := range [][]string{
				{"--key", `{"id":`},                // not JSON
				{"--key", `{"name":"item-1"}`},     // not the key attribute
				{"--key", `{"id":7}`, "--key", ""}, // a number for an S key... and an empty key
				{"--ledger", "paper"},
			} {
				_, stderr, code := c.Run(append(append([]string{"redrive"}, lf...), bad...)...)
				require.Equal(t, 2, code, "%v: %s", bad, stderr)
			}
			require.Equal(t, 10, counts()["failed"], "bad usage wrote nothing")

			out := c.MustRun(append([]string{"redrive", "--json", "--key", "item-00000003", "--key", `{"id":"item-00000004"}`,
				"--key", "no-such-item"}, lf...)...)
			require.JSONEq(t, `{"moved":2,"not_failed":1}`, out)
			require.Equal(t, 8, counts()["failed"])
			out = c.MustRun(append([]string{"redrive", "--key", "item-00000003"}, lf...)...)
			require.Equal(t, "moved 0  not failed 1\n", out, "a key no longer failed is a no-op")
			out = c.MustRun(append([]string{"redrive"}, lf...)...)
			require.Equal(t, "moved 8  not failed 0\n", out)
			s := counts()
			require.Equal(t, 0, s["failed"])
			require.Equal(t, 10, s["pending"])
		})
	}
}

// TestRedriveIgnoresExecItemEnv: a redrive run by an --exec CMD, whose environment holds the
// handled item's DYNAPART_KEY (and the other per-item variables), redrives every dead letter, not
// the handled item alone: --key is not read from the environment.
func TestRedriveIgnoresExecItemEnv(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 3)
	c.MustRun("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--exec", "exit 65", "--progress", "none")
	env := map[string]string{"DYNAPART_KEY": `{"id":"item-00000001"}`, "DYNAPART_SLOT": "0", "DYNAPART_ATTEMPT": "1",
		"DYNAPART_TOKEN": "1", "DYNAPART_IDEMPOTENCY_KEY": "x", "DYNAPART_VERSION": ""}
	out, stderr, code := c.RunEnv(env, "redrive", "--table", table)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "moved 3  not failed 0\n", out)
}
