package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynapart/dynapart/internal/progress"
	"github.com/dynapart/dynapart/lock"
)

// proc is one `dynapart work` process whose progress lines are collected.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []progress.Line
	stderr strings.Builder
	exited chan struct{}
	err    error
}

func (e *Env) startWork(args ...string) (*proc, error) {
	p := &proc{exited: make(chan struct{})}
	p.cmd = exec.Command(e.Bin, append([]string{"work", "--endpoint", e.Endpoint}, args...)...)
	p.cmd.Env = append(p.cmd.Environ(), "AWS_ACCESS_KEY_ID=dynapart", "AWS_SECRET_ACCESS_KEY=dynapart", "AWS_REGION=us-east-1")
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", e.Bin, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l progress.Line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				p.mu.Lock()
				p.lines = append(p.lines, l)
				p.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, out)
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *proc) last() progress.Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lines) == 0 {
		return progress.Line{Slot: -1}
	}
	return p.lines[len(p.lines)-1]
}

func (p *proc) all() []progress.Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]progress.Line(nil), p.lines...)
}

func (p *proc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stderr.String()
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

func (p *proc) kill() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitFor polls cond every 20 ms until it holds, the process exits or the timeout passes.
func (p *proc) waitFor(timeout time.Duration, what string, cond func(progress.Line) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond(p.last()) {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("worker exited (%v) before %s; stderr: %s", p.err, what, p.stderrText())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s; stderr: %s", what, timeout, p.stderrText())
		}
	}
}

func (p *proc) waitExit(timeout time.Duration) error {
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("worker: %v; stderr: %s", p.err, p.stderrText())
		}
		return nil
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("worker did not exit within %s; stderr: %s", timeout, p.stderrText())
	}
}

// TakeoverConfig is the lease timing of the takeover scenario.
type TakeoverConfig struct {
	LeaseTTL, Heartbeat, StandbyPoll, MaxClockSkew time.Duration
}

// Bound is the longest a SIGKILL takeover may take by design: the lease runs out at most TTL
// after the kill (its last renewal was at or before it), a contender waits MaxClockSkew more,
// then finds the slot at its next poll.
func (c TakeoverConfig) Bound() time.Duration { return c.LeaseTTL + c.MaxClockSkew + c.StandbyPoll }

// TimelinePoint is one progress line of a takeover run, relative to the signal.
type TimelinePoint struct {
	Worker    string // "holder" or "standby"
	At        time.Duration
	Completed int64
}

// Takeover is the time from a signal to a slot holder until the standby completes its first item.
type Takeover struct {
	Config  TakeoverConfig
	Items   int
	KillAcq Sample // SIGKILL to the standby's lease, seconds
	Kill    Sample // SIGKILL to the standby's first completed item, seconds
	TermAcq Sample
	Term    Sample          // SIGTERM to the standby's first completed item, seconds
	Series  []TimelinePoint // of the first SIGKILL repetition, for the plot
	TermSer []TimelinePoint // of the first SIGTERM repetition
}

// MeasureTakeover runs, reps times and for SIGKILL and SIGTERM each, a holder and a hot standby
// of one slot as `dynapart work --once` processes over a fresh table of items, signals the holder
// once it has done a tenth of them, and times the standby's lease and first completion from its
// --progress json lines.
func (e *Env) MeasureTakeover(ctx context.Context, items, reps int, cfg TakeoverConfig) (*Takeover, error) {
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	t := &Takeover{Config: cfg, Items: items}
	for rep := range reps {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
			acq, first, series, err := e.takeoverOnce(ctx, leases, items, cfg, sig)
			if err != nil {
				return nil, fmt.Errorf("takeover after %v: %w", sig, err)
			}
			if sig == syscall.SIGKILL {
				t.KillAcq, t.Kill = append(t.KillAcq, acq.Seconds()), append(t.Kill, first.Seconds())
				if t.Series == nil {
					t.Series = series
				}
			} else {
				t.TermAcq, t.Term = append(t.TermAcq, acq.Seconds()), append(t.Term, first.Seconds())
				if t.TermSer == nil {
					t.TermSer = series
				}
			}
			e.logf("takeover rep %d/%d: %v: standby's lease after %.2fs, first item after %.2fs", rep+1, reps, sig, acq.Seconds(), first.Seconds())
		}
	}
	return t, nil
}

func (e *Env) takeoverOnce(ctx context.Context, leases string, items int, cfg TakeoverConfig, sig syscall.Signal) (acq, first time.Duration, series []TimelinePoint, err error) {
	table, err := e.freshTable(ctx, "takeover", items)
	if err != nil {
		return 0, 0, nil, err
	}
	defer e.dropTable(table)
	args := func(owner string) []string {
		return []string{"--table", table, "--lease-table", leases, "--workers", "1", "--once",
			"--lease-ttl", cfg.LeaseTTL.String(), "--heartbeat", cfg.Heartbeat.String(), "--standby-poll", cfg.StandbyPoll.String(),
			"--max-clock-skew", cfg.MaxClockSkew.String(), "--poll-interval", "1s", "--concurrency", "16",
			"--owner", owner, "--progress", "json", "--log-level", "warn"}
	}
	holder, err := e.startWork(args("holder")...)
	if err != nil {
		return 0, 0, nil, err
	}
	defer holder.kill()
	if err := holder.waitFor(30*time.Second, "lease of the holder", func(l progress.Line) bool { return l.Slot == 0 }); err != nil {
		return 0, 0, nil, err
	}
	standby, err := e.startWork(args("standby")...)
	if err != nil {
		return 0, 0, nil, err
	}
	defer standby.kill()
	if err := standby.waitFor(30*time.Second, "standby state", func(l progress.Line) bool { return l.State == "standby" }); err != nil {
		return 0, 0, nil, err
	}
	killAt := int64(max(items/10, 50))
	if err := holder.waitFor(60*time.Second, fmt.Sprintf("%d items completed by the holder", killAt),
		func(l progress.Line) bool { return l.Completed >= killAt }); err != nil {
		return 0, 0, nil, err
	}
	if holder.last().Completed >= int64(items) {
		return 0, 0, nil, fmt.Errorf("the holder finished before the signal: use more items")
	}
	signalled := time.Now()
	if err := holder.cmd.Process.Signal(sig); err != nil {
		return 0, 0, nil, err
	}
	if err := standby.waitExit(3 * time.Minute); err != nil {
		return 0, 0, nil, err
	}
	if sig == syscall.SIGTERM {
		if err := holder.waitExit(30 * time.Second); err != nil {
			return 0, 0, nil, fmt.Errorf("holder after SIGTERM: %w", err)
		}
	}
	at := func(ms int64) time.Duration { return time.UnixMilli(ms).Sub(signalled) }
	var acqMs, firstMs, done int64
	for _, l := range standby.all() {
		if l.Event == "lease-acquired" && acqMs == 0 {
			acqMs = l.Time
		}
		if l.Event == "exit" {
			firstMs, done = l.FirstDone, l.Completed
		}
	}
	if acqMs == 0 || firstMs == 0 {
		return 0, 0, nil, fmt.Errorf("the standby never took the slot or completed nothing (%d done)", done)
	}
	for _, w := range []struct {
		name string
		p    *proc
	}{{"holder", holder}, {"standby", standby}} {
		for _, l := range w.p.all() {
			if l.Time > 0 {
				series = append(series, TimelinePoint{Worker: w.name, At: at(l.Time), Completed: l.Completed})
			}
		}
	}
	return at(acqMs), at(firstMs), series, nil
}

// Memory is the peak resident set of one worker process that processes a whole table.
type Memory struct {
	Sizes  []int
	PeakMB []Sample // per size
	Rate   []Sample // items/s per size
}

// MeasureMemory runs `dynapart work --once --complete-only` as one process over tables of each
// size and reads its peak RSS (getrusage of the child: ru_maxrss). Each repetition on the same
// table uses a new inline-ledger attribute prefix, so every item is pending again without
// reseeding.
func (e *Env) MeasureMemory(ctx context.Context, sizes []int, reps []int) (*Memory, error) {
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	m := &Memory{Sizes: sizes}
	for i, n := range sizes {
		table, err := e.freshTable(ctx, "memory", n)
		if err != nil {
			return nil, err
		}
		var peak, rate Sample
		for rep := range reps[i] {
			start := time.Now()
			p, err := e.startWork("--table", table, "--lease-table", leases, "--workers", "1", "--once", "--complete-only",
				"--concurrency", "32", "--attr-prefix", fmt.Sprintf("m%d_", rep), "--group", fmt.Sprintf("%s-%d", table, rep),
				"--progress", "none", "--log-level", "warn")
			if err == nil {
				err = p.waitExit(30 * time.Minute)
			}
			if err != nil {
				e.dropTable(table)
				return nil, err
			}
			ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
			if !ok {
				e.dropTable(table)
				return nil, fmt.Errorf("no rusage for the worker process")
			}
			peak = append(peak, float64(ru.Maxrss)/1024) // KiB on Linux
			rate = append(rate, float64(n)/time.Since(start).Seconds())
			e.logf("memory %d items rep %d/%d: peak RSS %.1f MiB, %.0f items/s", n, rep+1, reps[i], peak[len(peak)-1], rate[len(rate)-1])
		}
		e.dropTable(table)
		m.PeakMB, m.Rate = append(m.PeakMB, peak), append(m.Rate, rate)
	}
	return m, nil
}
