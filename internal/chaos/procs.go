package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynapart/dynapart/internal/progress"
)

// ModuleRoot finds the dynapart checkout that contains the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/dynapart/dynapart\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("chaos: not inside the dynapart module")
		}
		dir = parent
	}
}

// Binary returns a dynapart binary built from the current sources: bin/dynapart when it is newer
// than every .go file of the module, otherwise a fresh `go build` into dir.
func Binary(ctx context.Context, dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "bin", "dynapart")
	if st, err := os.Stat(bin); err == nil {
		stale := false
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(p, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") && !strings.HasSuffix(p, "_test.go") {
				if info, err := d.Info(); err == nil && info.ModTime().After(st.ModTime()) {
					stale = true
					return filepath.SkipAll
				}
			}
			return nil
		})
		if !stale {
			return bin, nil
		}
	}
	out := filepath.Join(dir, "dynapart")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/dynapart")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: go build ./cmd/dynapart: %w\n%s", err, b)
	}
	return out, nil
}

// Proc is one `dynapart work` process: its progress lines, its record file and its exit.
type Proc struct {
	Owner  string
	Record string
	Log    string
	cmd    *exec.Cmd

	mu      sync.Mutex
	lines   []progress.Line
	changed chan struct{} // closed and replaced on every line
	exited  chan struct{}
	exit    int
	killed  bool
	faulted bool // the scenario froze or cut off this process (see Fault)
}

// StartWorker starts `bin work` with args plus --owner, --progress json and --record; stderr goes
// to a log file in dir.
// notify, when not nil, gets a non-blocking send on every progress line of the process.
func StartWorker(bin, dir, owner string, notify chan struct{}, env []string, args ...string) (*Proc, error) {
	p := &Proc{
		Owner:   owner,
		Record:  filepath.Join(dir, owner+".keys"),
		Log:     filepath.Join(dir, owner+".log"),
		changed: make(chan struct{}),
		exited:  make(chan struct{}),
	}
	args = append([]string{"work"}, args...)
	args = append(args, "--owner", owner, "--progress", "json", "--record", p.Record)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(p.Log)
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = logf
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("chaos: start worker: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l progress.Line
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			p.mu.Lock()
			p.lines = append(p.lines, l)
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
			if notify != nil {
				select {
				case notify <- struct{}{}:
				default:
				}
			}
		}
		_ = p.cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.exit = p.cmd.ProcessState.ExitCode()
		p.mu.Unlock()
		close(p.exited)
		if notify != nil {
			select {
			case notify <- struct{}{}:
			default:
			}
		}
	}()
	return p, nil
}

// Last is the latest progress line (zero before the first).
func (p *Proc) Last() progress.Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lines) == 0 {
		return progress.Line{Slot: -1}
	}
	return p.lines[len(p.lines)-1]
}

// Lines returns every progress line so far.
func (p *Proc) Lines() []progress.Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]progress.Line(nil), p.lines...)
}

// WaitLine waits for a progress line after the first `from` lines that matches, and returns its
// index. It fails when the process exits first or ctx ends.
func (p *Proc) WaitLine(ctx context.Context, from int, match func(progress.Line) bool) (int, error) {
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if match(p.lines[i]) {
				p.mu.Unlock()
				return i, nil
			}
		}
		from = len(p.lines)
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-p.exited:
			// Lines written just before the exit are read before exited closes.
			p.mu.Lock()
			n := len(p.lines)
			p.mu.Unlock()
			if n == from {
				return -1, fmt.Errorf("chaos: %s exited (code %d) before the awaited progress", p.Owner, p.ExitCode())
			}
		case <-ctx.Done():
			return -1, context.Cause(ctx)
		}
	}
}

// Changed is closed at the next progress line.
func (p *Proc) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitCode is the exit code (-1 for a signal), valid after Exited.
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Killed reports whether Kill was called.
func (p *Proc) Killed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// Fault marks the process as one the scenario froze or cut off: its lost leases are that fault's,
// already in the scenario's bound (see fixture.countLeaseLosses).
func (p *Proc) Fault() {
	p.mu.Lock()
	p.faulted = true
	p.mu.Unlock()
}

// LostLeases are the leases (slot, token) the process reported lost, unless the scenario killed,
// froze or cut it off.
func (p *Proc) LostLeases() [][2]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed || p.faulted {
		return nil
	}
	var out [][2]int64
	for _, l := range p.lines {
		if l.Event == "lease-lost" {
			out = append(out, [2]int64{int64(l.Slot), l.Token})
		}
	}
	return out
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop ends a process that is still running (SIGKILL) without marking it as a chaos kill.
func (p *Proc) Stop() {
	if p.Alive() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

// LogTail returns the last n bytes of the process's stderr log.
func (p *Proc) LogTail(n int) string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitAll waits until every process has exited or the timeout passes.
func waitAll(ctx context.Context, procs []*Proc, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-t.C:
			return fmt.Errorf("chaos: %s still running after %s", p.Owner, timeout)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}
