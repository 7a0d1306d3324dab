package redrive_test

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

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
				{"--key", "item-1", "--key", strings.Repeat("x", 2049)}, // longer than any partition key
			} {
				_, stderr, code := c.Run(append(append([]string{"redrive"}, lf...), bad...)...)
				require.Equal(t, 2, code, "%v: %s", bad, stderr)
			}
			require.Equal(t, 10, counts()["failed"], "bad usage wrote nothing")
			_, stderr, _ := c.Run(append([]string{"redrive", "--key", strings.Repeat("x", 2049)}, lf...)...)
			require.Contains(t, stderr, "2049 bytes, where DynamoDB keeps at most 2048 in a partition key")
			out, stderr, code := c.Run(append([]string{"redrive", "--key", strings.Repeat("x", 2048)}, lf...)...)
			require.Equal(t, 0, code, stderr) // the longest key there may be: looked up, not refused
			require.Equal(t, "moved 0  not failed 1\n", out)

			out = c.MustRun(append([]string{"redrive", "--json", "--key", "item-00000003", "--key", `{"id":"item-00000004"}`,
				"--key", "no-such-item"}, lf...)...)
			require.JSONEq(t, `{"moved":2,"not_failed":1}`, out)
			require.Equal(t, 8, counts()["failed"])
			out = c.MustRun(append([]string{"redrive", "--key", "item-00000003"}, lf...)...)
			require.Equal(t, "moved 0  not failed 1\n", out, "a key no longer failed is a no-op")
			out, stderr, code = c.Run(append([]string{"redrive"}, lf...)...)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, "moved 8  not failed 0\n", out)
			require.Contains(t, stderr, "a finished --once group does not pass again: run work with a new --group")
			s := counts()
			require.Equal(t, 0, s["failed"])
			require.Equal(t, 10, s["pending"])

			// The finished group does not pass again, and says so; a new group handles the items.
			work := append([]string{"work", "--lease-table", leases, "--once", "--exec", "true", "--progress", "none"}, lf...)
			_, stderr, code = c.Run(work...)
			require.Equal(t, 0, code, stderr)
			require.Contains(t, stderr, "nothing to do (a finished once-group does not pass again")
			require.Equal(t, 10, counts()["pending"])
			c.MustRun(append(work, "--group", table+"/redo", "--workers", "1")...)
			require.Equal(t, 10, counts()["done"])
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

// TestRedriveNumberKeys: on a table keyed by a number, a --key DynamoDB would refuse (NaN, an
// infinity, hex, out of range) exits 2 before anything is written, and the spellings JSON lacks
// (.5, +5, 5.) and the largest magnitudes are keys DynamoDB takes.
func TestRedriveNumberKeys(t *testing.T) {
	c := clitest.New(t)
	table, leases := clitest.TableNames(t)
	c.MustRun("init", "--table", table, "--key", "id:N", "--lease-table", leases)
	for _, bad := range []string{"NaN", "Inf", "0x10p0", "1e200", "1e-131"} {
		_, stderr, code := c.Run("redrive", "--table", table, "--key", "7", "--key", bad)
		require.Equal(t, 2, code, "%s: %s", bad, stderr)
		require.Contains(t, stderr, `--key "`+bad+`": attribute "id": number`)
	}
	out := c.MustRun("redrive", "--table", table, "--key", ".5", "--key", "+5", "--key", "5.", "--key", "9.9e125", "--key", "-1e-130")
	require.Equal(t, "moved 0  not failed 5\n", out)
}

// TestRedriveInterrupted: Ctrl-C (SIGINT) ends a redrive that waits on DynamoDB with exit 1 and a
// message that says so, where it was killed without a word.
func TestRedriveInterrupted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			conn, err := ln.Accept() // and never answer
			if err != nil {
				return
			}
			accepted <- conn
		}
	}()
	c := clitest.New(t)
	c.Endpoint = "http://" + ln.Addr().String()
	cmd := c.Command("redrive", "--table", "users")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	select {
	case conn := <-accepted:
		defer conn.Close()
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the redrive never reached DynamoDB")
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
	require.Equal(t, 1, exit.ExitCode(), "stderr: %s", stderr.String())
	require.Contains(t, stderr.String(), "dynapart: redrive interrupted before its first move")
}
