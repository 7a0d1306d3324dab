package bench

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/dynapart/dynapart/lock"
)

// ResizeConfig is the fleet of the resize scenario.
type ResizeConfig struct {
	From, To    int           // slots at the start of the scaled run, and after `dynapart scale`
	At          float64       // share of the items done when the scaled run is scaled (about a third)
	Sleep       time.Duration // the --exec handler's sleep per item: latency-bound work
	Concurrency int           // handlers in flight per worker
	LeaseTTL    time.Duration // --lease-ttl of every worker (--heartbeat is a quarter of it)
}

// Resize variants.
const (
	ResizeFrom   = "from"   // (a) From slots alone
	ResizeTo     = "to"     // (b) To slots from the start
	ResizeScaled = "scaled" // (c) From slots, scaled to To mid-job
)

// Resize is the elastic-fleet scenario: one table processed by (a) From slots alone, (b) To slots
// from the start, (c) From slots scaled to To at At of the items (the new workers join without
// --workers). Wall times in seconds and the fleet's scan RCU (the sum of every process's rcu).
type Resize struct {
	Config ResizeConfig
	Items  int
	Wall   map[string]Sample
	RCU    map[string]Sample
	// ScaledAt is how many items were done when the scale command ran, per repetition of (c).
	ScaledAt Sample
}

// MeasureResize runs the three variants reps times, interleaved, each on a fresh table of items.
func (e *Env) MeasureResize(ctx context.Context, items, reps int, cfg ResizeConfig) (*Resize, error) {
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	r := &Resize{Config: cfg, Items: items, Wall: map[string]Sample{}, RCU: map[string]Sample{}}
	for rep := range reps {
		for _, v := range []string{ResizeFrom, ResizeTo, ResizeScaled} {
			run, err := e.resizeOnce(ctx, leases, items, cfg, v)
			if err != nil {
				return nil, fmt.Errorf("resize %s: %w", v, err)
			}
			r.Wall[v] = append(r.Wall[v], run.wall.Seconds())
			r.RCU[v] = append(r.RCU[v], run.rcu)
			if v == ResizeScaled {
				r.ScaledAt = append(r.ScaledAt, float64(run.scaledAt))
			}
			e.logf("resize rep %d/%d: %-6s %6.1fs, %6.1f RCU%s", rep+1, reps, v, run.wall.Seconds(), run.rcu, run.note)
		}
	}
	return r, nil
}

// resizeRun is one variant's run.
type resizeRun struct {
	wall     time.Duration
	rcu      float64
	scaledAt int64
	note     string
}

// resizeFleet is the worker processes of one run.
type resizeFleet struct {
	e      *Env
	table  string
	leases string
	cfg    ResizeConfig
	procs  []*proc
}

// start starts a worker; workers 0 joins the group at its current n (no --workers).
func (f *resizeFleet) start(workers int) error {
	args := []string{"--table", f.table, "--lease-table", f.leases, "--once",
		"--lease-ttl", f.cfg.LeaseTTL.String(), "--heartbeat", (f.cfg.LeaseTTL / 4).String(), "--standby-poll", "500ms",
		"--max-clock-skew", "250ms", "--poll-interval", "1s", "--page-size", "100", "--concurrency", fmt.Sprint(f.cfg.Concurrency),
		"--exec", fmt.Sprintf("sleep %.3f", f.cfg.Sleep.Seconds()),
		"--owner", fmt.Sprintf("w%d", len(f.procs)), "--progress", "json", "--log-level", "warn"}
	if workers > 0 {
		args = append(args, "--workers", fmt.Sprint(workers))
	}
	p, err := f.e.startWork(args...)
	if err != nil {
		return err
	}
	f.procs = append(f.procs, p)
	return nil
}

func (f *resizeFleet) completed() int64 {
	var n int64
	for _, p := range f.procs {
		n += p.last().Completed
	}
	return n
}

func (f *resizeFleet) kill() {
	for _, p := range f.procs {
		p.kill()
	}
}

// resizeOnce runs variant v on a fresh table and waits until every worker has exited 0.
func (e *Env) resizeOnce(ctx context.Context, leases string, items int, cfg ResizeConfig, v string) (resizeRun, error) {
	table, err := e.freshTable(ctx, "resize", items)
	if err != nil {
		return resizeRun{}, err
	}
	defer e.dropTable(table)
	f := &resizeFleet{e: e, table: table, leases: leases, cfg: cfg}
	defer f.kill()
	n := cfg.From
	if v == ResizeTo {
		n = cfg.To
	}
	start := time.Now()
	for range n {
		if err := f.start(n); err != nil {
			return resizeRun{}, err
		}
	}
	var run resizeRun
	if v == ResizeScaled {
		if run.scaledAt, err = f.scaleAt(ctx, int64(cfg.At*float64(items))); err != nil {
			return resizeRun{}, err
		}
	}
	for _, p := range f.procs {
		if err := p.waitExit(10 * time.Minute); err != nil {
			return resizeRun{}, err
		}
	}
	run.wall = time.Since(start)
	var done int64
	for _, p := range f.procs {
		l := p.last()
		run.rcu += l.RCU
		done += l.Completed
	}
	if done != int64(items) {
		return resizeRun{}, fmt.Errorf("%d items completed by the workers, want %d (each once)", done, items)
	}
	if v == ResizeScaled {
		run.note = fmt.Sprintf(" (scaled %d -> %d at %d done)", cfg.From, cfg.To, run.scaledAt)
	}
	return run, nil
}

// scaleAt waits until at items are done, runs `dynapart scale` to cfg.To and starts the new
// workers without --workers; it returns the items done when the scale ran.
func (f *resizeFleet) scaleAt(ctx context.Context, at int64) (int64, error) {
	for f.completed() < at {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-f.procs[0].exited:
			return 0, fmt.Errorf("a worker exited before %d items were done: use more items", at)
		case <-time.After(20 * time.Millisecond):
		}
	}
	done := f.completed()
	cmd := exec.CommandContext(ctx, f.e.Bin, "scale", "--endpoint", f.e.Endpoint, "--group", f.table+"/default",
		"--lease-table", f.leases, "--workers", fmt.Sprint(f.cfg.To))
	cmd.Env = append(cmd.Environ(), "AWS_ACCESS_KEY_ID=dynapart", "AWS_SECRET_ACCESS_KEY=dynapart", "AWS_REGION=us-east-1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("dynapart scale: %w: %s", err, out)
	}
	for range f.cfg.To - f.cfg.From {
		if err := f.start(0); err != nil {
			return 0, err
		}
	}
	return done, nil
}

// resizeGoals are the summary rows of the resize scenario.
func (r *Results) resizeGoals() []Goal {
	z := r.Resize
	if z == nil {
		return nil
	}
	c := z.Config
	rcu := Ratio(z.RCU[ResizeScaled], z.RCU[ResizeTo])
	return []Goal{
		{fmt.Sprintf("%d → %d slots mid-job: the job's scan RCU ÷ one pass (%d slots from the start)", c.From, c.To, c.To),
			"<= 1.1x (segment mode reads nothing again)", rcu.X(), verdict(rcu.Max() <= 1.1)},
		{fmt.Sprintf("%d → %d slots mid-job: wall ÷ %d slots alone", c.From, c.To, c.From),
			fmt.Sprintf("< 1x (ideal without re-plan cost: %.2fx)", idealScaled(c)), Ratio(z.Wall[ResizeScaled], z.Wall[ResizeFrom]).X(),
			verdict(Ratio(z.Wall[ResizeScaled], z.Wall[ResizeFrom]).Median() < 1)},
		{fmt.Sprintf("%d → %d slots mid-job: wall ÷ %d slots from the start", c.From, c.To, c.To),
			fmt.Sprintf("reported (ideal without re-plan cost: %.2fx)", idealScaled(c)*float64(c.To)/float64(c.From)),
			Ratio(z.Wall[ResizeScaled], z.Wall[ResizeTo]).X(), "–"},
	}
}

// idealScaled is the scaled run's wall time as a share of the From-slot run's if throughput were
// proportional to the slots and the re-plan free: At of the items at From, the rest at To.
func idealScaled(c ResizeConfig) float64 {
	return c.At + (1-c.At)*float64(c.From)/float64(c.To)
}

func (r *Results) resizeSection(w writer) {
	w("## Elastic fleet: scaling a running job\n\n")
	z := r.Resize
	if z == nil {
		pending(w, ScenarioResize, r.Errors[ScenarioResize])
		return
	}
	c := z.Config
	w("One fresh table of %s items per run, processed by `bin/dynapart work --once` processes (segment mode, the default segment count, "+
		"`--concurrency %d --exec 'sleep %.3f'`: latency-bound handlers, so more workers finish sooner even on 2 cores; "+
		"`--lease-ttl %s --heartbeat %s`): (a) %d slots alone; (b) %d slots from the start; (c) %d slots, and once about %.0f%% of the items are done "+
		"(%s items, median) `dynapart scale --workers %d` and %d more workers started without `--workers` (they join at the group's n). "+
		"Wall time from the first process's start to the last one's exit; RCU is the scan read capacity of every process (`rcu` of its last `--progress json` line), summed. "+
		"Every run must complete each item exactly once by the workers' counts.\n\n",
		num(float64(z.Items), 0), c.Concurrency, c.Sleep.Seconds(), c.LeaseTTL, c.LeaseTTL/4, c.From, c.To, c.From, 100*c.At,
		z.ScaledAt.Fmt(0, ""), c.To, c.To-c.From)
	w("| run | wall | scan RCU |\n|---|---|---|\n")
	for _, v := range []struct{ key, name string }{
		{ResizeFrom, fmt.Sprintf("(a) %d slots alone", c.From)},
		{ResizeTo, fmt.Sprintf("(b) %d slots from the start", c.To)},
		{ResizeScaled, fmt.Sprintf("(c) %d → %d slots mid-job", c.From, c.To)},
	} {
		w("| %s | %s | %s |\n", v.name, z.Wall[v.key].Fmt(1, " s"), z.RCU[v.key].Fmt(1, ""))
	}
	w("| **(c) ÷ (a)** | **%s** (ideal %.2fx) | %s |\n", Ratio(z.Wall[ResizeScaled], z.Wall[ResizeFrom]).X(), idealScaled(c),
		Ratio(z.RCU[ResizeScaled], z.RCU[ResizeFrom]).X())
	w("| **(c) ÷ (b)** | **%s** (ideal %.2fx) | **%s** (goal <= 1.1x) |\n\n", Ratio(z.Wall[ResizeScaled], z.Wall[ResizeTo]).X(),
		idealScaled(c)*float64(c.To)/float64(c.From), Ratio(z.RCU[ResizeScaled], z.RCU[ResizeTo]).X())
	w("(a) and (c) scan the segments of a group created at %d slots, (b) those of one created at %d (the default segment count is the smallest multiple of "+
		"workers × 4 sub-segments that is at least 64: %d and %d), so the scan RCU of (c) ÷ (a) compares the same segments and (c) ÷ (b) is the issue's goal "+
		"(one pass of a fleet of %d).\n\n", c.From, c.To, defaultSegments(c.From), defaultSegments(c.To), c.To)
	w("The ideal assumes throughput proportional to the slots and a free re-plan. What the scaled run pays beyond it: the workers notice the new plan " +
		"within a heartbeat, stop claiming at a page boundary, let their handlers finish, save their checkpoints and release; the new plan's holders wait until no " +
		"slot is held under the old one, then continue each segment from its last checkpoint (pages in flight are read again, items done are skipped).\n\n")
}

// defaultSegments is the segment count of a new group of n workers with 4 sub-segments (the work
// default): the smallest multiple of n × 4 that is at least 64.
func defaultSegments(n int) int {
	step := n * 4
	return (64 + step - 1) / step * step
}
