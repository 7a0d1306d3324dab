package demo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// watch shows the workers' progress until every one has exited, SIGKILLs a slot holder once
// --kill-at of the items are done, and scales the group up once a standby has taken over.
func (d *demo) watch(ctx context.Context) error {
	view := &demoView{out: d.out, tty: cli.IsTerminal(d.out)}
	killAt := int64(float64(d.f.items) * d.f.killAt)
	var m cli.RateMeter
	m.Update(time.Now(), 0) // the first frame's rate is measured from the start, not 0/s
	deadline := time.After(5 * time.Minute)
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for running := true; running; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("demo: workers did not finish within 5 minutes (logs in %s)", d.dir)
		case now := <-ticker.C:
			var total int64
			for _, p := range d.procs {
				total += p.snapshot().Completed
			}
			rate := m.Update(now, total)
			if d.victim == nil && total >= killAt && d.killSlotHolder(total) && view.tty {
				view.lines = 0
			}
			if d.victim != nil && d.resize == nil && d.f.scaleUp > 0 && d.tookOver() && total < int64(d.f.items) {
				if err := d.scaleUp(ctx, total); err != nil {
					return err
				}
				if view.tty {
					view.lines = 0
				}
			}
			view.show(now, d.procs, total, int64(d.f.items), rate)
			running = slices.ContainsFunc(d.procs, func(p *demoProc) bool { return !p.done() })
		}
	}
	return nil
}

// killSlotHolder SIGKILLs a worker that holds a slot and works, if there is one.
func (d *demo) killSlotHolder(total int64) bool {
	for _, p := range d.procs {
		if s := p.snapshot(); s.Slot >= 0 && s.State == string(worker.StateWorking) {
			d.victim = p
			break
		}
	}
	if d.victim == nil {
		return false
	}
	d.victim.kill()
	d.killTime = time.Now()
	d.say("!! %d/%d done: SIGKILL %s (slot %d)", total, d.f.items, d.victim.owner, d.victim.snapshot().Slot)
	return true
}
