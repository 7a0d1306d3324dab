package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/internal/progress"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

// The binary, for the few tests that need a process of their own (signals, SIGKILL, the demo):
// built on first use.
var (
	buildOnce   sync.Once
	dynapartBin string
	buildErr    error
)

func builtBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dynapart-cli-test-")
		if err != nil {
			buildErr = err
			return
		}
		dynapartBin = filepath.Join(dir, "dynapart")
		if out, err := exec.Command("go", "build", "-race", "-o", dynapartBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build dynapart: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return dynapartBin
}

// cli runs dynapart against the test endpoint: in this process (run, mustRun), or as a process of
// its own (command).
type cli struct {
	t        *testing.T
	endpoint string
	dir      string
}

func newCLI(t *testing.T) *cli {
	return &cli{t: t, endpoint: ddbtest.Endpoint(t), dir: t.TempDir()}
}

// seededTables makes a source table (key id:S) with items demo items and a lease table; both are
// deleted after the test.
func (c *cli) seededTables(t *testing.T, items int) (table, leases string) {
	t.Helper()
	db := ddbtest.Client(t)
	table, leases = ddbtest.TableName(t, ""), ddbtest.TableName(t, "lease")
	ddbtest.DeleteOnCleanup(t, db, table)
	ddbtest.DeleteOnCleanup(t, db, leases)
	c.mustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases)
	c.mustRun("seed", "--table", table, "--items", strconv.Itoa(items))
	return table, leases
}

// command is dynapart args as a process of its own.
func (c *cli) command(args ...string) *exec.Cmd {
	cmd := exec.Command(builtBinary(c.t), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "DYNAPART_ENDPOINT="+c.endpoint, "AWS_ACCESS_KEY_ID=", "AWS_PROFILE=")
	return cmd
}

// run runs dynapart args in this process and returns stdout, stderr and the exit code.
func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	return c.runEnv(nil, args...)
}

// runEnv is run with more environment variables.
func (c *cli) runEnv(env map[string]string, args ...string) (stdout, stderr string, code int) {
	return c.start(env, args...)()
}

// start starts dynapart args in this process, with more environment variables; wait waits for
// its end and returns stdout, stderr and the exit code.
func (c *cli) start(env map[string]string, args ...string) (wait func() (stdout, stderr string, code int)) {
	var o, e lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(args, c.stdio(&o, &e, env)) }()
	return func() (string, string, int) {
		code := <-done
		return o.String(), e.String(), code
	}
}

// stdio is the stdio of an in-process run: the environment of command, and more.
func (c *cli) stdio(out, err io.Writer, more map[string]string) stdio {
	env := map[string]string{"DYNAPART_ENDPOINT": c.endpoint, "AWS_ACCESS_KEY_ID": "", "AWS_PROFILE": ""}
	maps.Copy(env, more)
	lookup := func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
	return stdio{out: out, err: err, lookupEnv: lookup, http: ddbtest.HTTPClient}
}

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a run (log lines, --exec output).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (c *cli) mustRun(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	require.Equal(c.t, 0, code, "dynapart %v\nstdout: %s\nstderr: %s", args, out, errOut)
	return out
}

func tableNames(t *testing.T, db *dynamodb.Client) []string {
	var names []string
	var start *string
	for {
		out, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{ExclusiveStartTableName: start})
		require.NoError(t, err)
		names = append(names, out.TableNames...)
		if out.LastEvaluatedTableName == nil {
			return names
		}
		start = out.LastEvaluatedTableName
	}
}

func TestBadUsageExits2AndWritesNothing(t *testing.T) {
	c := newCLI(t)
	db := ddbtest.Client(t)
	before := tableNames(t, db)
	tbl := ddbtest.TableName(t, "never")
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"work", "--workers", "2"}, "--table"},
		{[]string{"work", "--table", tbl, "--workers", "-1"}, "--workers"},
		{[]string{"work", "--table", tbl}, "--workers"}, // joins a group that does not exist
		{[]string{"work", "--table", tbl, "--workers", "2", "--mode", "sideways"}, "--mode"},
		{[]string{"work", "--table", tbl, "--workers", "2", "--no-steal"}, "--no-steal"}, // continuous workers never steal
		{[]string{"work", "--table", tbl, "--workers", "2", "--ledger", "paper"}, "--ledger"},
		{[]string{"init", "--table", tbl, "--endpoint", "not a url"}, "--endpoint"},
		{[]string{"init", "--table", tbl, "--endpoint", "ftp://x"}, "--endpoint"},
		{[]string{"init", "--table", tbl, "--key", "id:X"}, "--key"},
		{[]string{"seed", "--table", tbl, "--items", "-1"}, "--items"},
		{[]string{"partition", "--workers", "0", "a"}, "--workers"},
		{[]string{"partition", "--workers", "2", "--type", "B", "!!notbase64"}, "base64"},
		{[]string{"verify"}, "--table"},
		{[]string{"work", "--table", tbl, "--workers", "2", "--no-such-flag"}, "no-such-flag"},
		{[]string{"frobnicate"}, "frobnicate"},
		{[]string{"work", "--table", tbl, "--workers", "2", "--once"}, tbl}, // missing table
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := c.run(tc.args...)
			require.Equal(t, 2, code, "stderr: %s", stderr)
			require.Contains(t, stderr, tc.says)
		})
	}
	t.Run("env", func(t *testing.T) {
		_, stderr, code := c.runEnv(map[string]string{"DYNAPART_WORKERS": "many"}, "work", "--table", tbl)
		require.Equal(t, 2, code)
		require.Contains(t, stderr, "DYNAPART_WORKERS")
	})
	// Other packages' tests share this DynamoDB Local and make their own tables meanwhile, so look
	// only at the tables these commands could have made: the named one and the default ones.
	mine := func(names []string) []string {
		var out []string
		for _, n := range names {
			if n == tbl || n == "dynapart-leases" || n == "dynapart-ledger" {
				out = append(out, n)
			}
		}
		return out
	}
	require.ElementsMatch(t, mine(before), mine(tableNames(t, db)), "bad usage must create no table")
}

func TestPartitionCommand(t *testing.T) {
	c := newCLI(t)
	out := c.mustRun("partition", "--workers", "4", "--type", "N", "--", "1", "2", "7", "-5", "12345678901234567890123456789012345678")
	require.Equal(t, "1\t1\n2\t2\n7\t3\n-5\t3\n12345678901234567890123456789012345678\t2\n", out)
}

// TestEndToEnd: init, seed, three `work --once --exec` processes for two slots, verify.
func TestEndToEnd(t *testing.T) {
	c := newCLI(t)
	table, leases := c.seededTables(t, 300)
	c.mustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases) // idempotent

	_, _, code := c.run("verify", "--table", table)
	require.Equal(t, 1, code, "nothing is done yet")

	log := filepath.Join(c.dir, "handled.log")
	script := fmt.Sprintf(`printf '%%s %%s\n' "$DYNAPART_SLOT" "$(cat | head -c 200 | tr -d '\n' | cut -c1-30)" >> %s`, log)
	// Handlers run once per item only while no lease is lost, so the lease is long enough that a
	// loaded machine's slow heartbeats do not lose one (a takeover is tested elsewhere).
	var workers []func() (string, string, int)
	for i := range 3 {
		workers = append(workers, c.start(nil, "work", "--table", table, "--lease-table", leases, "--workers", "2", "--once",
			"--exec", script, "--lease-ttl", "15s", "--owner", fmt.Sprintf("w%d", i), "--progress", "none"))
	}
	for i, wait := range workers {
		_, stderr, code := wait()
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("worker %d stderr:\n%s", i, stderr)
			}
		})
		require.Equal(t, 0, code, "worker %d stderr:\n%s", i, stderr)
	}
	out := c.mustRun("verify", "--table", table, "--json")
	var s map[string]int
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Equal(t, map[string]int{"total": 300, "done": 300, "pending": 0, "claimed": 0, "failed": 0}, s)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Equal(t, 300, strings.Count(string(b), "\n"), "one handler run per item")

	status := c.mustRun("status", "--group", table+"/default", "--lease-table", leases, "--json")
	var st statusJSON
	require.NoError(t, json.Unmarshal([]byte(status), &st))
	require.Equal(t, 2, st.Workers)
	require.True(t, st.Finished)
}

// progressReader follows a worker's --progress json lines.
type progressReader struct {
	lines chan progress.Line
}

func followProgress(r io.Reader) *progressReader {
	p := &progressReader{lines: make(chan progress.Line, 1024)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var l progress.Line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				select {
				case p.lines <- l:
				default: // the test reads only what it waits for
				}
			}
		}
	}()
	return p
}

// waitFor returns the first line that matches, or fails after the timeout.
func (p *progressReader) waitFor(t *testing.T, timeout time.Duration, match func(progress.Line) bool) progress.Line {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			require.True(t, ok, "worker exited before the expected progress")
			if match(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("no matching progress within %s", timeout)
		}
	}
}

// TestSIGKILLMidRun: a slot holder is killed with SIGKILL; the standby takes over and the job
// finishes with every item done once.
func TestSIGKILLMidRun(t *testing.T) {
	c := newCLI(t)
	table, leases := c.seededTables(t, 3000)

	type proc struct {
		cmd    *exec.Cmd
		prog   *progressReader
		record string
	}
	start := func(i int) *proc {
		rec := filepath.Join(c.dir, fmt.Sprintf("w%d.keys", i))
		p := c.command("work", "--table", table, "--lease-table", leases, "--workers", "2", "--once",
			"--lease-ttl", "2s", "--heartbeat", "500ms", "--standby-poll", "200ms", "--concurrency", "4",
			"--owner", fmt.Sprintf("w%d", i), "--progress", "json", "--record", rec)
		stdout, err := p.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, p.Start())
		t.Cleanup(func() { _ = p.Process.Kill() })
		return &proc{cmd: p, prog: followProgress(stdout), record: rec}
	}
	ps := []*proc{start(0), start(1), start(2)}
	// Kill the first worker seen holding a slot after it has completed some items.
	var victim *proc
	for victim == nil {
		for _, p := range ps {
			l := p.prog.waitFor(t, time.Minute, func(progress.Line) bool { return true })
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
	out := c.mustRun("verify", "--table", table, "--json")
	require.JSONEq(t, `{"total":3000,"done":3000,"pending":0,"claimed":0,"failed":0}`, out)
	counts := map[string]int{}
	for _, p := range ps {
		_, err := readRecord(p.record, counts)
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
	c := newCLI(t)
	table, leases := c.seededTables(t, 10)
	start := func(owner string) (*exec.Cmd, *progressReader) {
		p := c.command("work", "--table", table, "--lease-table", leases, "--workers", "1", "--lease-ttl", "60s",
			"--standby-poll", "100ms", "--poll-interval", "1h", "--owner", owner, "--progress", "json")
		stdout, err := p.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, p.Start())
		t.Cleanup(func() { _ = p.Process.Kill() })
		return p, followProgress(stdout)
	}
	a, ap := start("a")
	ap.waitFor(t, time.Minute, func(l progress.Line) bool { return l.Event == "lease-acquired" })
	b, bp := start("b")
	bp.waitFor(t, time.Minute, func(l progress.Line) bool { return l.State == "standby" })

	sent := time.Now()
	require.NoError(t, a.Process.Signal(syscall.SIGTERM))
	l := bp.waitFor(t, 30*time.Second, func(l progress.Line) bool { return l.Event == "lease-acquired" })
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
	c := newCLI(t)
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
	c.mustRun("init", "--table", table, "--lease-table", leases)

	seen := filepath.Join(c.dir, "seen")
	script := fmt.Sprintf(`printf '%%s\n' "$DYNAPART_KEY" >> %s; cat > /dev/null`, seen)
	for _, tbl := range []string{table, btable} {
		c.mustRun("work", "--table", tbl, "--lease-table", leases, "--workers", "1", "--once", "--exec", script, "--progress", "none")
		c.mustRun("verify", "--table", tbl)
	}
	entries, err := os.ReadDir(c.dir)
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
