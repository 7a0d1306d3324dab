package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/lock"
)

// demoResize is the demo's scale-up: `dynapart scale` on the running group once the standby has
// taken over, and the workers started without --workers to fill the new slots.
type demoResize struct {
	at       int64    // items done when it ran
	from, to int      // the group's N before and after
	said     string   // what dynapart scale printed
	joined   []string // the owners started without --workers
	end      lock.GroupState
	endErr   error // reading the group's plan at the end failed
}

// group is the demo's lease group (work's default: TABLE/JOB).
func (d *demo) group() string { return d.table + "/default" }

// tookOver reports whether a worker other than the killed one has completed an item after taking
// a slot over.
func (d *demo) tookOver() bool {
	for _, p := range d.procs {
		if p != d.victim && p.hasFirst() {
			return true
		}
	}
	return false
}

// scaleUp runs `dynapart scale` (this binary) to --slots + --scale-up and starts as many workers
// without --workers: they join the group at its new N.
func (d *demo) scaleUp(ctx context.Context, total int64) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r := &demoResize{at: total, from: d.f.slots, to: d.f.slots + d.f.scaleUp}
	cmd := exec.CommandContext(ctx, self, "scale", "--endpoint", d.g.Endpoint, "--group", d.group(),
		"--lease-table", d.leaseTable, "--workers", fmt.Sprint(r.to))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("demo: dynapart scale: %w: %s", err, strings.TrimSpace(string(out)))
	}
	r.said = strings.TrimSpace(string(out))
	d.say("!! %d/%d done: dynapart scale --group %s --workers %d\n   %s", total, d.f.items, d.group(), r.to, r.said)
	for range d.f.scaleUp {
		p, err := startDemoProc(d.workerCmd(self, len(d.procs), true), d.dir)
		if err != nil {
			return err
		}
		d.procs = append(d.procs, p)
		r.joined = append(r.joined, p.owner)
	}
	d.say("   started %s without --workers: joining at N=%d", strings.Join(r.joined, ", "), r.to)
	d.resize = r
	return nil
}

// readPlan reads the group's plan at the end (after a scale-up).
func (d *demo) readPlan(ctx context.Context) {
	if d.resize == nil {
		return
	}
	lc, err := lock.New(d.db, d.leaseTable)
	if err == nil {
		d.resize.end, err = lc.GroupState(ctx, d.group())
	}
	d.resize.endErr = err
}

// sayResize says what the scale-up did; false when the group did not end at the new N under plan
// epoch 1.
func (d *demo) sayResize() bool {
	r := d.resize
	if r == nil {
		if d.f.scaleUp > 0 {
			d.say("resize:            none (the job ended before the standby took over)")
		}
		return true
	}
	d.say("resize:            dynapart scale %d -> %s at %d/%d done; %s joined without --workers",
		r.from, cli.Count(r.to, "slot"), r.at, d.f.items, strings.Join(r.joined, ", "))
	if r.endErr != nil {
		d.say("                   reading the group's plan failed: %v", r.endErr)
		return false
	}
	d.say("                   the group ended at N=%d, plan epoch %d; the workers re-planned from their checkpoints", r.end.N, r.end.Epoch)
	return r.end.N == r.to && r.end.Epoch == 1
}
