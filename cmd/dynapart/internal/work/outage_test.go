package work_test

import (
	"bufio"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/chaos"
)

// A worker started while DynamoDB is unreachable (every connection reset) does not exit: it logs
// the failed start reads, retries them, and does the job once DynamoDB is back.
func TestWorkStartsThroughAnOutage(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 20)
	proxy, err := chaos.StartProxy(c.Endpoint, 1, chaos.Rates{Faults: map[chaos.Fault]float64{chaos.FaultReset: 1}})
	require.NoError(t, err)
	defer proxy.Close()

	p := c.Command("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once",
		"--standby-poll", "100ms", "--log-format", "json")
	p.Env = append(p.Env, "DYNAPART_ENDPOINT="+proxy.URL())
	stderr, err := p.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Process.Kill() })

	retrying := make(chan struct{})
	var once sync.Once
	var logged strings.Builder
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logged.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "reading the tables at start failed, retrying") {
				once.Do(func() { close(retrying) })
			}
		}
	}()
	select {
	case <-retrying:
	case <-scanned:
		t.Fatalf("the worker exited instead of retrying its start reads:\n%s", logged.String())
	case <-time.After(time.Minute):
		t.Fatal("the worker did not retry its start reads within a minute")
	}
	proxy.SetEnabled(false) // DynamoDB is back
	require.NoError(t, p.Wait(), "the worker does the job once DynamoDB is back")
	<-scanned
	require.Contains(t, logged.String(), `"completed":20`)
	require.Positive(t, proxy.Injected())
}

// TestOutageTimeoutFlag: --outage-timeout (or DYNAPART_OUTAGE_TIMEOUT) 0 exits 2 naming the flag;
// a short one ends a worker that cannot reach DynamoDB with exit 1 and the error, where the
// default (15m) keeps it retrying.
func TestOutageTimeoutFlag(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 5)
	work := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--standby-poll", "100ms"}

	requireRefused(t, c, table, work, "outage-timeout", "0", "--outage-timeout 0")

	proxy, err := chaos.StartProxy(c.Endpoint, 1, chaos.Rates{Faults: map[chaos.Fault]float64{chaos.FaultReset: 1}})
	require.NoError(t, err)
	defer proxy.Close()
	_, stderr, code := c.RunEnv(map[string]string{"DYNAPART_ENDPOINT": proxy.URL()}, append(work, "--outage-timeout", "1s")...)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "reading the tables at start failed, retrying", "it retried before giving up")
	require.Contains(t, stderr, "giving up on the start reads after")
	// The proxy resets every connection; the client meets it as a reset, or (writing the request
	// as the reset lands) as a closed connection or a broken pipe: the error it gave up on is told.
	require.Regexp(t, `connection reset|use of closed network connection|broken pipe`, stderr)
	require.Contains(t, c.MustRun("work", "--help"), "--outage-timeout")
}
