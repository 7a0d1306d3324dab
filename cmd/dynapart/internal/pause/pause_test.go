package pause_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/internal/progress"
	"github.com/dynapart/dynapart/lock"
)

// Pausing or resuming a group that does not exist exits 2 and writes nothing; --group is required.
func TestPauseUnknownGroupExits2(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	leases := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(context.Background(), db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	for _, cmd := range []string{"pause", "resume"} {
		_, stderr, code := c.Run(cmd, "--group", "no/such", "--lease-table", leases)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, `group "no/such" does not exist`)
		require.Equal(t, 1, strings.Count(stderr, "no/such"), "the group is named once: %s", stderr)
		_, stderr, code = c.Run(cmd, "--lease-table", leases)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, "--group")
	}
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(leases)})
	require.NoError(t, err)
	require.Empty(t, out.Items, "nothing written")
}

// TestPauseResumeCLI pauses a run from the command line before any item is done: both workers
// report paused in their progress lines and keep their slots, status says paused (JSON and
// text), pausing again is a no-op; after resume every item is done once and status --json shows
// each slot's counts from its checkpoint, summing to the items processed.
func TestPauseResumeCLI(t *testing.T) {
	const items = 120
	c := clitest.New(t)
	table, leases := c.SeededTables(t, items)
	group := table + "/default"
	gate := filepath.Join(c.Dir, "GO") // nothing is done before the pause

	procs := startGatedWorkers(t, c, table, leases, gate)
	for _, pr := range procs {
		pr.progress.WaitFor(t, 30*time.Second, func(l progress.Line) bool { return l.State == "working" })
	}
	out := c.MustRun("pause", "--group", group, "--lease-table", leases)
	require.Contains(t, out, "paused")
	out = c.MustRun("pause", "--group", group, "--lease-table", leases)
	require.Contains(t, out, "already paused")
	for _, pr := range procs {
		pr.progress.WaitFor(t, 10*time.Second, func(l progress.Line) bool { return l.Paused && l.State == "working" })
	}
	require.NoError(t, os.WriteFile(gate, nil, 0o644)) // the handlers in flight finish

	var doc status.Document
	require.NoError(t, json.Unmarshal([]byte(c.MustRun("status", "--group", group, "--lease-table", leases, "--json")), &doc))
	require.True(t, doc.Paused)
	for _, s := range doc.Slots {
		require.True(t, s.Held, "slot %d kept while paused", s.Slot)
		require.Equal(t, "working", s.State)
	}
	text := c.MustRun("status", "--group", group, "--lease-table", leases)
	require.Contains(t, text, "PAUSED")

	out = c.MustRun("resume", "--group", group, "--lease-table", leases)
	require.Contains(t, out, "resumed")
	for _, pr := range procs {
		require.NoError(t, pr.wait())
	}
	var sum map[string]int
	require.NoError(t, json.Unmarshal([]byte(c.MustRun("verify", "--table", table, "--json")), &sum))
	require.Equal(t, items, sum["done"])

	requireFinishedWithCounts(t, c, group, leases, items)
}

// gatedWorker is a `work --once` process whose handlers wait for the gate file.
type gatedWorker struct {
	progress *clitest.ProgressReader
	wait     func() error
}

// startGatedWorkers starts two workers of a two-slot group whose handlers wait for the gate file.
func startGatedWorkers(t *testing.T, c *clitest.CLI, table, leases, gate string) []gatedWorker {
	t.Helper()
	// Every handler waits for the gate file: nothing is done before it exists.
	script := fmt.Sprintf(`while [ ! -f %s ]; do sleep 0.05; done`, gate)
	return startWorkers(t, c, table, leases, "--exec", script, "--lease-ttl", "6s", "--heartbeat", "1s")
}

// startWorkers starts two `work --once --concurrency 2 --progress json` processes of a two-slot
// group with the extra flags.
func startWorkers(t *testing.T, c *clitest.CLI, table, leases string, flags ...string) []gatedWorker {
	t.Helper()
	var procs []gatedWorker
	for i := range 2 {
		args := append([]string{"work", "--table", table, "--lease-table", leases, "--workers", "2", "--once",
			"--concurrency", "2", "--owner", fmt.Sprintf("w%d", i), "--progress", "json"}, flags...)
		cmd := c.Command(args...)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var e bytes.Buffer
		cmd.Stderr = &e
		require.NoError(t, cmd.Start())
		procs = append(procs, gatedWorker{progress: clitest.FollowProgress(stdout), wait: cmd.Wait})
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			if t.Failed() {
				t.Logf("worker %d stderr:\n%s", i, e.String())
			}
		})
	}
	return procs
}

// requireFinishedWithCounts checks that status shows the group finished, not paused, with each
// slot's counts from its checkpoint summing to the items.
func requireFinishedWithCounts(t *testing.T, c *clitest.CLI, group, leases string, items int) {
	t.Helper()
	var doc status.Document
	require.NoError(t, json.Unmarshal([]byte(c.MustRun("status", "--group", group, "--lease-table", leases, "--json")), &doc))
	require.False(t, doc.Paused)
	require.True(t, doc.Finished)
	var done, scanned int64
	for _, s := range doc.Slots {
		require.NotNil(t, s.Progress, "slot %d has counts", s.Slot)
		require.NotNil(t, s.Fraction)
		require.Equal(t, 1.0, *s.Fraction)
		require.NotNil(t, s.Progress.ShareEstimate, "the table's item count / N")
		done += s.Progress.Done
		scanned += s.Progress.Scanned
	}
	require.Equal(t, int64(items), done)
	require.Equal(t, int64(items), scanned)
	require.NotNil(t, doc.Progress)
	require.Equal(t, int64(items), doc.Progress.Done)
	require.Equal(t, 0.0, *doc.Progress.ETASeconds)
	text := c.MustRun("status", "--group", group, "--lease-table", leases)
	require.NotContains(t, text, "PAUSED")
	require.Regexp(t, fmt.Sprintf(`(?m)^group\s+%d\s+0\s+%d\s`, items, items), text)
	require.True(t, strings.Contains(text, "an estimate"), text)
}
