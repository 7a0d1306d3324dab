package ddbtest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A second, independent DynamoDB: tests that should hold on any DynamoDB run once per backend,
// the way a database driver's test suite runs against each database:
//
//	ddbtest.ForEachBackend(t, func(t *testing.T, b ddbtest.Backend) {
//		b.Require(t, ddbtest.CapStreams) // skips on a backend that lacks it
//		db := ddbtest.Client(t)          // inside, every harness call talks to b
//	})
//
// Backends: "dynamodb-local" (the endpoint of Endpoint: $DYNAPART_TEST_ENDPOINT or the DynamoDB
// Local the harness starts) and "moto" (moto's server: $DYNAPART_TEST_MOTO_ENDPOINT, or
// moto_server started by the harness on a free loopback port). With CI=true a missing moto_server
// fails the test; otherwise the moto subtests skip. $DYNAPART_TEST_BACKENDS (comma separated names)
// picks a subset.

// Capability is something a backend may lack; tests that need it skip on such a backend.
type Capability string

const (
	// CapStreams: DynamoDB Streams (the stream lease history of the chaos suite).
	CapStreams Capability = "streams"
	// CapTransactionCapacity: ConsumedCapacity in TransactWriteItems answers (WCU accounting).
	CapTransactionCapacity Capability = "transaction-capacity"
	// CapRestart: the harness can restart the server with its data (persistence across restarts).
	CapRestart Capability = "restart"
	// CapConcurrentIsolation: conditional writes and transactions on the same item from concurrent
	// requests are serialized (one wins). moto's threaded server does not guarantee it: two
	// concurrent conditional updates may both succeed.
	CapConcurrentIsolation Capability = "concurrent-isolation"
	// CapBinaryKeySegments: parallel Scan (Segment, TotalSegments) of a table whose partition key
	// is binary (moto answers 500 for it).
	CapBinaryKeySegments Capability = "binary-key-segments"
	// CapPartiQLConditions: BatchExecuteStatement with conditional PartiQL UPDATEs of several
	// clauses, each statement answered on its own (ConditionalCheckFailed with the old item). moto's
	// server answers such a statement with an HTTP 500, and does not report a failed condition.
	CapPartiQLConditions Capability = "partiql-conditions"
)

// Backend is one DynamoDB implementation.
type Backend struct {
	Name string
	// Lacks lists the capabilities the backend does not have.
	Lacks []Capability
	start func() (string, error)
}

// Has reports whether the backend has the capability.
func (b Backend) Has(c Capability) bool { return !slices.Contains(b.Lacks, c) }

// Require skips the test when the backend lacks the capability.
func (b Backend) Require(t testing.TB, c Capability) {
	t.Helper()
	if !b.Has(c) {
		t.Skipf("backend %s lacks %s", b.Name, c)
	}
}

// LacksEnv names the variable that lists what the default endpoint lacks, for running the suite
// against another DynamoDB (e.g. LocalStack: DYNAPART_TEST_ENDPOINT=http://127.0.0.1:4566).
const LacksEnv = "DYNAPART_TEST_LACKS"

// localBackend is the default endpoint: DynamoDB Local, or $DYNAPART_TEST_ENDPOINT's server.
func localBackend() Backend {
	local := Backend{Name: "dynamodb-local", start: func() (string, error) {
		startOnce.Do(start)
		return endpoint, startErr
	}}
	if os.Getenv(EndpointEnv) != "" {
		// Someone else's server: the harness cannot restart it, and it lacks what LacksEnv says.
		local.Lacks = []Capability{CapRestart}
		for _, c := range strings.Split(os.Getenv(LacksEnv), ",") {
			if c = strings.TrimSpace(c); c != "" {
				local.Lacks = append(local.Lacks, Capability(c))
			}
		}
	}
	return local
}

// Backends returns the backends the suite runs against, $DYNAPART_TEST_BACKENDS picking a subset.
func Backends() []Backend {
	local := localBackend()
	moto := Backend{Name: "moto", start: startMoto,
		Lacks: []Capability{CapStreams, CapTransactionCapacity, CapRestart, CapConcurrentIsolation, CapBinaryKeySegments, CapPartiQLConditions}}
	all := []Backend{local, moto}
	pick := os.Getenv("DYNAPART_TEST_BACKENDS")
	if pick == "" {
		return all
	}
	var out []Backend
	for _, b := range all {
		if slices.Contains(strings.Split(pick, ","), b.Name) {
			out = append(out, b)
		}
	}
	return out
}

var (
	bindMu   sync.Mutex
	bindings = map[string]Backend{} // test name -> its backend, for Endpoint inside ForEachBackend
)

// ForEachBackend runs f in a subtest per backend; inside it Endpoint, Config and Client talk to
// that backend (so helpers that call them need no changes).
func ForEachBackend(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) {
			bindMu.Lock()
			bindings[t.Name()] = b
			bindMu.Unlock()
			t.Cleanup(func() {
				bindMu.Lock()
				delete(bindings, t.Name())
				bindMu.Unlock()
			})
			f(t, b)
		})
	}
}

// Need skips the test when the backend it runs against (the enclosing ForEachBackend's, else the
// default one) lacks the capability.
func Need(t testing.TB, c Capability) {
	t.Helper()
	b, ok := boundBackend(t)
	if !ok {
		b = localBackend()
	}
	b.Require(t, c)
}

// Has reports whether the backend of t (the nearest enclosing ForEachBackend subtest's, else the
// default endpoint's) has the capability, for a test that adapts to it instead of skipping.
func Has(t testing.TB, c Capability) bool {
	b, ok := boundBackend(t)
	if !ok {
		b = localBackend()
	}
	return b.Has(c)
}

// boundBackend is the backend of the nearest enclosing ForEachBackend subtest.
func boundBackend(t testing.TB) (Backend, bool) {
	bindMu.Lock()
	defer bindMu.Unlock()
	for name := t.Name(); name != ""; {
		if b, ok := bindings[name]; ok {
			return b, true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return Backend{}, false
}

// MotoEndpointEnv points the moto backend at a running moto server instead of starting one.
const MotoEndpointEnv = "DYNAPART_TEST_MOTO_ENDPOINT"

var (
	motoOnce     sync.Once
	motoEndpoint string
	motoErr      error
	motoCmd      *exec.Cmd
)

// errNoMoto: moto_server is not installed.
var errNoMoto = errors.New("moto_server not found in PATH (pip install 'moto[server]')")

func startMoto() (string, error) {
	motoOnce.Do(func() {
		if e := os.Getenv(MotoEndpointEnv); e != "" {
			motoEndpoint = e
			return
		}
		motoEndpoint, motoErr = launchMoto()
	})
	return motoEndpoint, motoErr
}

// launchMoto starts moto_server on a free loopback port and waits until it answers. Its output
// goes to a file, so the harness runs no goroutine for it (no leak for goleak to find).
func launchMoto() (string, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return "", errNoMoto
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	logFile, err := os.CreateTemp("", "moto-*.log")
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start moto_server: %w", err)
	}
	motoCmd = cmd
	ep := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := client.Get(ep + "/"); err == nil {
			_ = resp.Body.Close()
			client.CloseIdleConnections()
			return ep, nil
		}
	}
	client.CloseIdleConnections()
	stopMoto()
	return "", fmt.Errorf("moto_server on port %d did not answer within 60s (log %s)", port, filepath.Clean(logFile.Name()))
}

// stopMoto ends a moto_server the harness started (its whole process group).
func stopMoto() {
	if motoCmd == nil || motoCmd.Process == nil {
		return
	}
	_ = syscall.Kill(-motoCmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = motoCmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-motoCmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	motoCmd = nil
}

// backendEndpoint is the endpoint of b, failing (CI) or skipping the test when there is none.
func backendEndpoint(t testing.TB, b Backend) string {
	t.Helper()
	ep, err := b.start()
	if ep == "" || err != nil {
		msg := fmt.Sprintf("backend %s is not reachable: %v", b.Name, err)
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return ep
}
