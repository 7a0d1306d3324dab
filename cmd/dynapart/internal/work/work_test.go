package work_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/work"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/internal/progress"
)

// TestSIGKILLMidRun: a slot holder is killed with SIGKILL; the standby takes over and the job
// finishes with every item done once.
func TestSIGKILLMidRun(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 3000)

	type proc struct {
		cmd    *exec.Cmd
		prog   *clitest.ProgressReader
		record string
	}
	start := func(i int) *proc {
		rec := filepath.Join(c.Dir, fmt.Sprintf("w%d.keys", i))
		p := c.Command("work", "--table", table, "--lease-table", leases, "--workers", "2", "--once",
			"--lease-ttl", "2s", "--heartbeat", "500ms", "--standby-poll", "200ms", "--concurrency", "4",
			"--owner", fmt.Sprintf("w%d", i), "--progress", "json", "--record", rec)
		stdout, err := p.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, p.Start())
		t.Cleanup(func() { _ = p.Process.Kill() })
		return &proc{cmd: p, prog: clitest.FollowProgress(stdout), record: rec}
	}
	ps := []*proc{start(0), start(1), start(2)}
	// Kill the first worker seen holding a slot after it has completed some items.
	var victim *proc
	for victim == nil {
		for _, p := range ps {
			l := p.prog.WaitFor(t, time.Minute, func(progress.Line) bool { return true })
			if l.Slot >= 0 && l.Completed >= 100 {
				victim = p
				break
			}
		}
	}
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	_ = victim.cmd.Wait()
	for _, p := range ps {
		if p != victim {
			require.NoError(t, p.cmd.Wait())
		}
	}
	out := c.MustRun("verify", "--table", table, "--json")
	require.JSONEq(t, `{"total":3000,"done":3000,"pending":0,"claimed":0,"failed":0}`, out)
	counts := map[string]int{}
	for _, p := range ps {
		_, err := work.ReadRecord(p.record, counts)
		require.NoError(t, err)
	}
	// A SIGKILL can cut the record line written after a completion, so the records may miss a
	// few of the victim's completions (the ledger has them all); they may never repeat a key.
	require.LessOrEqual(t, len(counts), 3000)
	require.Greater(t, len(counts), 2900)
	for k, n := range counts {
		if n != 1 {
			t.Fatalf("key %s completed %d times", k, n)
		}
	}
}

// TestSIGTERMReleasesSlot: SIGTERM makes a holder release its slot; the standby takes it without
// waiting for the lease to expire.
func TestSIGTERMReleasesSlot(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 10)
	start := func(owner string) (*exec.Cmd, *clitest.ProgressReader) {
		p := c.Command("work", "--table", table, "--lease-table", leases, "--workers", "1", "--lease-ttl", "60s",
			"--standby-poll", "100ms", "--poll-interval", "1h", "--owner", owner, "--progress", "json")
		stdout, err := p.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, p.Start())
		t.Cleanup(func() { _ = p.Process.Kill() })
		return p, clitest.FollowProgress(stdout)
	}
	a, ap := start("a")
	ap.WaitFor(t, time.Minute, func(l progress.Line) bool { return l.Event == "lease-acquired" })
	b, bp := start("b")
	bp.WaitFor(t, time.Minute, func(l progress.Line) bool { return l.State == "standby" })

	sent := time.Now()
	require.NoError(t, a.Process.Signal(syscall.SIGTERM))
	l := bp.WaitFor(t, 30*time.Second, func(l progress.Line) bool { return l.Event == "lease-acquired" })
	took := time.Since(sent)
	require.NoError(t, a.Wait(), "SIGTERM is a graceful stop: exit 0")
	require.Zero(t, l.Takeovers, "the slot was released, not taken over after expiry")
	require.Less(t, took, 30*time.Second, "the standby must not wait for the 60s lease TTL")
	t.Logf("SIGTERM to standby acquisition: %s", took)
	require.NoError(t, b.Process.Signal(syscall.SIGTERM))
	require.NoError(t, b.Wait())
}

// TestExecIsInjectionProof: keys full of shell syntax and non-UTF-8 bytes reach the command only
// on stdin and in DYNAPART_KEY; nothing in them is executed.
func TestExecIsInjectionProof(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	ctx := context.Background()
	evil := []string{`a"b'c`, `$(touch PWNED1)`, "`touch PWNED2`", "line\nbreak", `'; touch PWNED3; '`, `\x00 & | ; > PWNED4`}
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	for _, k := range evil {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]typesAV{"id": sAV(k), "note": sAV("$(touch PWNED5)")}})
		require.NoError(t, err)
	}
	btable := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "B"})
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(btable), Item: map[string]typesAV{"id": bAV([]byte{0xff, 0xfe, '$', '(', 0x00, '\n'})}})
	require.NoError(t, err)
	leases := ddbtest.TableName(t, "lease")
	ddbtest.DeleteOnCleanup(t, db, leases)
	c.MustRun("init", "--table", table, "--lease-table", leases)

	seen := filepath.Join(c.Dir, "seen")
	script := fmt.Sprintf(`printf '%%s\n' "$DYNAPART_KEY" >> %s; cat > /dev/null`, seen)
	for _, tbl := range []string{table, btable} {
		c.MustRun("work", "--table", tbl, "--lease-table", leases, "--workers", "1", "--once", "--exec", script, "--progress", "none")
		c.MustRun("verify", "--table", tbl)
	}
	entries, err := os.ReadDir(c.Dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), "PWNED", "a key was executed")
	}
	b, err := os.ReadFile(seen)
	require.NoError(t, err)
	for _, k := range evil {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(map[string]string{"id": k}))
		require.Contains(t, string(b), want.String())
	}
	require.Contains(t, string(b), `{"id":"//4kKAAK"}`)
}

type typesAV = types.AttributeValue

func sAV(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func bAV(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }

// TestExecEffects: with --exec-effects the command's stdout commits with each completion: the item
// is transformed and a counter on another table counts every item once, with two workers.
func TestExecEffects(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 200)
	db := ddbtest.Client(t)
	counters := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "pk", Type: "S"})
	script := fmt.Sprintf(`cat >/dev/null; printf '{"set": {"migrated": true}, "writes": [{"update": {"table": "%s", "key": {"pk": "total"}, "add": {"n": 1}}}]}'`, counters)
	c.WorkOnce(table, leases, 2, "--exec", script, "--exec-effects")
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(counters),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "total"}}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Equal(t, "200", out.Item["n"].(*types.AttributeValueMemberN).Value)
	scan, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Len(t, scan.Items, 200)
	for _, it := range scan.Items {
		require.Equal(t, &types.AttributeValueMemberBOOL{Value: true}, it["migrated"])
		require.Equal(t, &types.AttributeValueMemberS{Value: "done"}, it["dp_status"])
	}
	stdout := c.MustRun("verify", "--table", table, "--json")
	require.Contains(t, stdout, `"done":200`)

	_, stderr, code := c.Run("work", "--table", table, "--workers", "1", "--exec-effects")
	require.Equal(t, 2, code, "--exec-effects without --exec: %s", stderr)
	require.Contains(t, stderr, "--exec-effects")
}

// TestExecStdout: without --exec-effects, CMD's stdout is the worker's stdout; with --progress json
// (whose lines stdout carries) it goes to stderr, and stdout stays one JSON value a line.
func TestExecStdout(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 3)
	script := `cat >/dev/null; echo "handled-by-cmd $DYNAPART_SLOT"`
	stdout := c.MustRun("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--exec", script, "--progress", "none")
	require.Equal(t, 3, strings.Count(stdout, "handled-by-cmd 0\n"), stdout)

	table, leases = c.SeededTables(t, 3)
	stdout, stderr, code := c.Run("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--exec", script, "--progress", "json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 3, strings.Count(stderr, "handled-by-cmd 0\n"), stderr)
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		require.True(t, json.Valid([]byte(line)), "a --progress json line: %q", line)
	}
}

// TestExecEffectsNull: a command that prints null (jq's answer for a missing field) gives no
// effects object: the attempt fails, nothing is applied, the item is not done.
func TestExecEffectsNull(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 3)
	c.WorkOnce(table, leases, 1, "--exec", `cat >/dev/null; echo null`, "--exec-effects", "--max-attempts", "1")
	stdout, _, code := c.Run("verify", "--table", table, "--json")
	require.Equal(t, 1, code, "verify exits 1 while items are not done")
	require.Contains(t, stdout, `"done":0`)
	require.Contains(t, stdout, `"failed":3`)
}
