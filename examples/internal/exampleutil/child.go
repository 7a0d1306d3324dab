package exampleutil

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// ChildEnv names the environment variable that makes a program run as a worker child: its value
// is the JSON spec of what the child runs. An example's main and its test binary both check it
// first (RunIfChild), so that a parent (the example, or its test) can start workers as real
// processes of the same binary and SIGKILL, SIGSTOP or SIGCONT them.
const ChildEnv = "DYNAPART_EXAMPLE_CHILD"

// childSpec decodes this process's child spec into v and reports whether the process is a child.
func childSpec(v any) (bool, error) {
	raw, ok := os.LookupEnv(ChildEnv)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return true, fmt.Errorf("%s: %w", ChildEnv, err)
	}
	return true, nil
}

// RunIfChild runs the child and exits when this process is a child (ChildEnv set): it decodes
// the spec into an S and calls run; the exit status is 0 when run returns nil, else 1 with the
// error on stderr. In any other process it returns at once.
func RunIfChild[S any](run func(context.Context, S) error) {
	var spec S
	child, err := childSpec(&spec)
	if !child {
		return
	}
	if err == nil {
		err = run(context.Background(), spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// The child's side of the conversation: lines on stdout to the parent, lines on stdin from it.
var (
	sayMu  sync.Mutex
	hearMu sync.Mutex
	stdin  = bufio.NewReader(os.Stdin)
)

// Say sends the parent one line (a child's stdout is the parent's to read).
func Say(format string, args ...any) {
	sayMu.Lock()
	defer sayMu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// Hear blocks until the parent sends line. At the end of stdin (the parent is gone) the child
// exits with status 3.
func Hear(line string) {
	hearMu.Lock()
	defer hearMu.Unlock()
	for {
		got, err := stdin.ReadString('\n')
		if strings.TrimSpace(got) == line {
			return
		}
		if err != nil {
			os.Exit(3)
		}
	}
}

// Hang blocks the calling goroutine until the child is killed (or its parent goes away: then it
// exits with status 3); it never returns. The rest of the process goes on: heartbeats keep its
// lease alive.
func Hang() {
	for {
		Hear("\x00never")
	}
}

// Proc is a child: this program started again with a child spec.
type Proc struct {
	Name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer // written by exec while the child runs: read only once it has exited

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every line, and at exit
	exited  chan struct{}
	err     error
}

// StartChild starts this program (os.Args[0]) again as a child running spec. name is for
// messages. The child dies with ctx.
func StartChild(ctx context.Context, name string, spec any) (*Proc, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: name, changed: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, os.Args[0])
	p.cmd.Env = append(os.Environ(), ChildEnv+"="+string(raw))
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go p.read(stdout)
	return p, nil
}

// read collects the child's lines, then reaps it (Wait only after every read is done).
func (p *Proc) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		p.mu.Lock()
		p.lines = append(p.lines, sc.Text())
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.err = err
	close(p.changed)
	p.mu.Unlock()
	close(p.exited)
}

// Await waits until the child has said a line that starts with prefix and returns it. It fails
// when the child exits first or ctx ends.
func (p *Proc) Await(ctx context.Context, prefix string) (string, error) {
	for {
		p.mu.Lock()
		for _, l := range p.lines {
			if strings.HasPrefix(l, prefix) {
				p.mu.Unlock()
				return l, nil
			}
		}
		changed, exited := p.changed, p.exitedLocked()
		p.mu.Unlock()
		if exited {
			return "", fmt.Errorf("%s exited (%v) before saying %q: %s", p.Name, p.err, prefix, tail(p.stderr.String()))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("%s: waiting for %q: %w", p.Name, prefix, ctx.Err())
		}
	}
}

func (p *Proc) exitedLocked() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Send sends the child one line on its stdin.
func (p *Proc) Send(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

// Signal sends the child sig (SIGSTOP freezes it: its heartbeats stop too; SIGCONT thaws it).
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits until the child is gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	_ = p.stdin.Close()
}

// Wait waits for the child to exit and returns an error unless it exited with status 0.
func (p *Proc) Wait(ctx context.Context) error {
	select {
	case <-p.exited:
	case <-ctx.Done():
		p.Kill()
		return fmt.Errorf("%s: %w", p.Name, ctx.Err())
	}
	_ = p.stdin.Close()
	if p.err != nil {
		return fmt.Errorf("%s: %w: %s", p.Name, p.err, tail(p.stderr.String()))
	}
	return nil
}

// tail is the last 2 KB of s.
func tail(s string) string {
	if len(s) > 2048 {
		s = "..." + s[len(s)-2048:]
	}
	return s
}

// KillAtCrashPoints starts one child per crash point (spec(i, point) is its spec), waits until
// each says it stopped at its crash point ("crash ...") and SIGKILLs it. It returns what each
// said. A child that exits before its crash point is an error.
func KillAtCrashPoints(ctx context.Context, points []CrashPoint, spec func(i int, point CrashPoint) any) ([]string, error) {
	var procs []*Proc
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	for i, cp := range points {
		p, err := StartChild(ctx, fmt.Sprintf("victim %d", i), spec(i, cp))
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	said := make([]string, len(procs))
	for i, p := range procs {
		line, err := p.Await(ctx, "crash")
		if err != nil {
			return nil, err
		}
		p.Kill()
		said[i] = line
	}
	return said, nil
}

// RunToEnd starts n children (spec(i) is the i-th one's spec) and waits until each has exited,
// with an error unless all exited with status 0.
func RunToEnd(ctx context.Context, n int, spec func(i int) any) error {
	var procs []*Proc
	var errs []error
	for i := range n {
		p, err := StartChild(ctx, fmt.Sprintf("worker %d", i), spec(i))
		if err != nil {
			errs = append(errs, err)
			break
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		errs = append(errs, p.Wait(ctx))
	}
	return errors.Join(errs...)
}
