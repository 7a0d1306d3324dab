package work_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// A CMD the shell cannot run (exit 127: not found; 126: not executable) is the operator's
// mistake, not the item's: it stops the worker with exit 2 naming the shell's error, and no
// attempt is counted. Before, every item's attempts were used up: with --max-attempts 1 a
// misspelt --exec dead-lettered the whole table, and --once exited 0.
func TestCommandNotRunnableStopsTheWorker(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 6)
	notExec := filepath.Join(t.TempDir(), "handler.sh")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644))
	counts := func() map[string]int {
		out, _, _ := c.Run("verify", "--table", table, "--json") // exit 1 while items are pending
		var m map[string]int
		require.NoError(t, json.Unmarshal([]byte(out), &m), out)
		return m
	}
	work := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none",
		"--max-attempts", "1", "--concurrency", "3"}
	for _, run := range []struct {
		exec  []string
		wants []string
	}{
		{[]string{"--exec", "no-such-command-dp"}, []string{"exit 127", "did not find the command", "no-such-command-dp"}},
		{[]string{"--exec", notExec, "--exec-effects"}, []string{"exit 126", "not executable", "Permission denied"}},
		{[]string{"--exec", "no-such-command-dp", "--complete-only", "--group", table + "/co"}, []string{"exit 127"}},
	} {
		_, stderr, code := c.Run(append(work, run.exec...)...)
		require.Equal(t, 2, code, stderr)
		for _, want := range append(run.wants, "--exec:", "not counted") {
			require.Contains(t, stderr, want)
		}
		require.Equal(t, map[string]int{"total": 6, "done": 0, "pending": 6, "claimed": 0, "failed": 0}, counts(), run.exec)
	}
	// Fixed, the next run handles every item on its first attempt.
	_, stderr, code := c.Run(append(work, "--exec", `test "$DYNAPART_ATTEMPT" = 1`)...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 6, counts()["done"])
}

// A worker that dead-lettered items says so at its end, with the commands that list them and
// give them back: a --once run exits 0 with them (its items are all handled), and the summary's
// dead_lettered count alone did not say what to do.
func TestDeadLettersToldAtTheEnd(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 2)
	_, stderr, code := c.Run("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none",
		"--exec", "exit 65")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "2 items dead-lettered by this worker: 'dynapart failed --table "+table+"'")
	require.Contains(t, stderr, "'dynapart redrive --table "+table+"'")
	out, stderr, code := c.Run("failed", "--table", table)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "exit status 65")
}
