package demo

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/internal/progress"
	"github.com/dynapart/dynapart/worker"
)

// demoProcSpec is a worker process of the demo, before it starts.
type demoProcSpec struct {
	id     int
	owner  string
	record string // its --record file
	cmd    *exec.Cmd
}

// demoProc is one worker process of the demo, which follows its --progress json lines.
type demoProc struct {
	demoProcSpec
	log      *os.File // its stderr
	mu       sync.Mutex
	last     progress.Line
	killed   bool
	exitCode int
	exited   chan struct{}
	firstAcq time.Time // when this process first held a slot after the kill
	firstAt  time.Time // its first completion after that
}

// startDemoProc starts the process with its stderr in dir/OWNER.log.
func startDemoProc(spec demoProcSpec, dir string) (*demoProc, error) {
	p := &demoProc{demoProcSpec: spec, exited: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.log, err = os.Create(filepath.Join(dir, p.owner+".log")); err != nil {
		return nil, err
	}
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	go p.read(stdout)
	return p, nil
}

// stop kills the process if it still runs and closes its log.
func (p *demoProc) stop() {
	_ = p.cmd.Process.Kill()
	p.log.Close()
}

// kill SIGKILLs the process.
func (p *demoProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
}

// done reports whether the process has exited.
func (p *demoProc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// read follows the process's progress lines until it exits.
func (p *demoProc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var l progress.Line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		p.mu.Lock()
		p.last = l
		if l.Event == "lease-acquired" && l.Takeovers > 0 && p.firstAcq.IsZero() {
			p.firstAcq = time.Now()
		}
		if l.Event == "first-after-takeover" && p.firstAt.IsZero() {
			p.firstAt = time.Now()
		}
		p.mu.Unlock()
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.exitCode = p.cmd.ProcessState.ExitCode()
	p.mu.Unlock()
	_ = err
	close(p.exited)
}

// hasFirst reports whether the process completed an item after taking a slot over.
func (p *demoProc) hasFirst() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.firstAt.IsZero()
}

func (p *demoProc) snapshot() progress.Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *demoProc) state() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.killed:
		return "KILLED"
	case p.cmd.ProcessState != nil:
		return "exited"
	case p.last.State == "":
		return "starting"
	}
	return p.last.State
}

func renderDemo(w io.Writer, procs []*demoProc, total, items int64, rate float64) int {
	fmt.Fprintf(w, "\r\033[K  all      ▕%s▏ %6d/%d %6.0f items/s\n", cli.Bar(total, items, 30), total, items, rate)
	for _, p := range procs {
		s := p.snapshot()
		slot := "   -"
		if s.Slot >= 0 && p.state() == string(worker.StateWorking) {
			slot = fmt.Sprintf("slot %d", s.Slot)
		}
		fmt.Fprintf(w, "\r\033[K  %s %-7s %-9s %6d done  takeovers %d\n", p.owner, slot, p.state(), s.Completed, s.Takeovers)
	}
	return len(procs) + 1
}

// demoView shows the workers' progress: redrawn in place on a terminal, a line every 2s otherwise.
type demoView struct {
	out     io.Writer
	tty     bool
	lines   int // lines drawn last time, to redraw over
	lastLog time.Time
}

// show shows the progress at now.
func (v *demoView) show(now time.Time, procs []*demoProc, total, items int64, rate float64) {
	if v.tty {
		if v.lines > 0 {
			fmt.Fprintf(v.out, "\033[%dA", v.lines)
		}
		v.lines = renderDemo(v.out, procs, total, items, rate)
		return
	}
	if now.Sub(v.lastLog) < 2*time.Second {
		return
	}
	v.lastLog = now
	parts := []string{}
	for _, p := range procs {
		s := p.snapshot()
		parts = append(parts, fmt.Sprintf("%s slot=%d %s done=%d", p.owner, s.Slot, p.state(), s.Completed))
	}
	fmt.Fprintf(v.out, "   %d/%d done %.0f/s | %s\n", total, items, rate, strings.Join(parts, " | "))
}
