package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/internal/progress"
)

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

// workOnce runs n `work --once` for n slots side by side and waits for all of them.
func (c *cli) workOnce(table, leases string, n int, extra ...string) {
	c.t.Helper()
	var workers []func() (string, string, int)
	for range n {
		workers = append(workers, c.start(nil, append([]string{"work", "--table", table, "--lease-table", leases,
			"--workers", strconv.Itoa(n), "--once", "--exec", "cat >/dev/null", "--progress", "none"}, extra...)...))
	}
	for i, wait := range workers {
		_, stderr, code := wait()
		require.Equal(c.t, 0, code, "worker %d: %s", i, stderr)
	}
}
