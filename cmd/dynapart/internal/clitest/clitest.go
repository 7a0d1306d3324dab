// Package clitest runs dynapart in tests against the test DynamoDB: in this process (CLI.Run,
// CLI.MustRun, CLI.Start) or as a process of its own, built with -race on first use (CLI.Command).
package clitest

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

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/root"
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
		if out, err := exec.Command("go", "build", "-race", "-o", dynapartBin, "github.com/dynapart/dynapart/cmd/dynapart").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build dynapart: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return dynapartBin
}

// CLI runs dynapart against the test endpoint: in this process (Run, MustRun), or as a process of
// its own (Command).
type CLI struct {
	t        *testing.T
	Endpoint string
	Dir      string
}

// New is a CLI for t, running in a temporary directory.
func New(t *testing.T) *CLI {
	return &CLI{t: t, Endpoint: ddbtest.Endpoint(t), Dir: t.TempDir()}
}

// SeededTables makes a source table (key id:S) with items demo items and a lease table; both are
// deleted after the test.
func (c *CLI) SeededTables(t *testing.T, items int) (table, leases string) {
	t.Helper()
	table, leases = TableNames(t)
	c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases)
	c.MustRun("seed", "--table", table, "--items", strconv.Itoa(items))
	return table, leases
}

// TableNames names a source table and a lease table for t, which a test creates as it needs
// them (init with its own flags); both are deleted after the test.
func TableNames(t *testing.T) (table, leases string) {
	t.Helper()
	db := ddbtest.Client(t)
	table, leases = ddbtest.TableName(t, ""), ddbtest.TableName(t, "lease")
	ddbtest.DeleteOnCleanup(t, db, table)
	ddbtest.DeleteOnCleanup(t, db, leases)
	return table, leases
}

// Command is dynapart args as a process of its own.
func (c *CLI) Command(args ...string) *exec.Cmd {
	cmd := exec.Command(builtBinary(c.t), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "DYNAPART_ENDPOINT="+c.Endpoint, "AWS_ACCESS_KEY_ID=", "AWS_PROFILE=")
	return cmd
}

// Run runs dynapart args in this process and returns stdout, stderr and the exit code.
func (c *CLI) Run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	return c.RunEnv(nil, args...)
}

// RunEnv is run with more environment variables.
func (c *CLI) RunEnv(env map[string]string, args ...string) (stdout, stderr string, code int) {
	return c.Start(env, args...)()
}

// Start starts dynapart args in this process, with more environment variables; wait waits for
// its end and returns stdout, stderr and the exit code.
func (c *CLI) Start(env map[string]string, args ...string) (wait func() (stdout, stderr string, code int)) {
	var o, e lockedBuffer
	done := make(chan int, 1)
	go func() { done <- root.Run(args, c.stdio(&o, &e, env)) }()
	return func() (string, string, int) {
		code := <-done
		return o.String(), e.String(), code
	}
}

// stdio is the stdio of an in-process run: the environment of command, and more.
func (c *CLI) stdio(out, err io.Writer, more map[string]string) cli.Stdio {
	env := map[string]string{"DYNAPART_ENDPOINT": c.Endpoint, "AWS_ACCESS_KEY_ID": "", "AWS_PROFILE": ""}
	maps.Copy(env, more)
	lookup := func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
	return cli.Stdio{Out: out, Err: err, LookupEnv: lookup, HTTP: ddbtest.HTTPClient}
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

// MustRun runs dynapart args in this process, fails the test unless it exits 0, and returns stdout.
func (c *CLI) MustRun(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.Run(args...)
	require.Equal(c.t, 0, code, "dynapart %v\nstdout: %s\nstderr: %s", args, out, errOut)
	return out
}

// ProgressReader follows a worker's --progress json lines.
type ProgressReader struct {
	lines chan progress.Line
}

// FollowProgress reads the --progress json lines of r.
func FollowProgress(r io.Reader) *ProgressReader {
	p := &ProgressReader{lines: make(chan progress.Line, 1024)}
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

// WaitFor returns the first line that matches, or fails after the timeout.
func (p *ProgressReader) WaitFor(t *testing.T, timeout time.Duration, match func(progress.Line) bool) progress.Line {
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

// WorkOnce runs n `work --once` for n slots side by side and waits for all of them.
func (c *CLI) WorkOnce(table, leases string, n int, extra ...string) {
	c.t.Helper()
	var workers []func() (string, string, int)
	for range n {
		workers = append(workers, c.Start(nil, append([]string{"work", "--table", table, "--lease-table", leases,
			"--workers", strconv.Itoa(n), "--once", "--exec", "cat >/dev/null", "--progress", "none"}, extra...)...))
	}
	for i, wait := range workers {
		_, stderr, code := wait()
		require.Equal(c.t, 0, code, "worker %d: %s", i, stderr)
	}
}
