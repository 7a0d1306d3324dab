package work_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestSecondSignalKillsCommands: a second SIGINT exits at once, and kills the --exec commands
// running first. Each runs in its own process group, which a terminal's Ctrl-C does not reach:
// they were left running beside the next run, which took their items over (helper-68).
func TestSecondSignalKillsCommands(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 2)
	fifo := filepath.Join(c.Dir, "started")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	p := c.Command("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--concurrency", "2",
		"--progress", "none", "--exec", `echo $$ > "$STARTED"; exec sleep 300`)
	p.Env = append(p.Env, "STARTED="+fifo)
	stderr, err := p.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Process.Kill() })

	pids := readPIDs(t, fifo, 2) // both commands run
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	require.NoError(t, p.Process.Signal(syscall.SIGINT))
	// Two signals sent at once may arrive as one: the second is sent once the first is logged.
	logs := bufio.NewScanner(stderr)
	for logs.Scan() && !strings.Contains(logs.Text(), "signal received") {
	}
	require.NoError(t, p.Process.Signal(syscall.SIGINT))
	go func() { // the rest of stderr, so that the worker never blocks on it
		for logs.Scan() {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "exit 1: %v", err)
		require.Equal(t, 1, ee.ExitCode())
	case <-time.After(time.Minute):
		t.Fatal("the second signal did not exit at once")
	}
	for _, pid := range pids {
		require.False(t, running(pid), "command %d still running after the second signal", pid)
	}
}

// readPIDs reads n process ids written to fifo, one a line, by writers that each open it once.
func readPIDs(t *testing.T, fifo string, n int) []int {
	t.Helper()
	var pids []int
	for len(pids) < n {
		f, err := os.Open(fifo) // blocks until a writer opens it
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		require.NoError(t, f.Close())
	}
	return pids
}

// running reports whether process pid exists and is not a zombie (one killed whose parent, init
// here, has not reaped it yet).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}
