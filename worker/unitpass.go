package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// unitRun is the units a unit pass reads: units of slot's share, whose markers (in marks) name
// the pass's lease. It saves each unit's cursor on its marker (see steal.go).
type unitRun struct {
	marks markerSet
	slot  int
	units []int

	mu    sync.Mutex
	saved map[int]string // the cursor last saved per unit
}

func newUnitRun(marks markerSet, slot int, units []int) *unitRun {
	return &unitRun{marks: marks, slot: slot, units: units, saved: map[int]string{}}
}

// runUnitPass reads u's units from cursor ("" from their beginning; a position of the scanner
// restricted to them) under lease and marks them done (with the pass's dirty) on their markers.
// of is the checkpoint of the pass the units belong to (its plan epoch and n).
func (w *Worker) runUnitPass(ctx context.Context, e *env, lease *lock.Lease, h Handler, plan scan.Plan, of slotCheckpoint, u *unitRun, cursor string, stopAt time.Time) (passResult, error) {
	cp := slotCheckpoint{epoch: of.epoch, n: of.n, pass: of.pass, scan: cursor}
	now := w.cfg.Clock.Now()
	p := &pass{w: w, e: e, lease: lease, h: h, plan: plan, cp: cp, stopAt: stopAt, ctx: ctx, startedAt: now,
		pausedAtStart: w.pause.pausedTime(now), unit: u}
	if w.cfg.BatchClaims {
		p.gate = newClaimGate(w.cfg.Concurrency, w.cfg.ClaimTTL)
	}
	res, err := p.run()
	if err != nil {
		return res, err
	}
	wctx, cancel := w.markerWriteContext(ctx, lease)
	defer cancel()
	cursors, err := u.cursors(res.cp.scan)
	if err != nil {
		return res, err
	}
	// A thief's counts go on the first unit's marker, for the owner to add to its slot's; the
	// owner's own unit pass counts them in its pass directly.
	counts := lock.UnitCounts{Done: res.cp.counts.done, Failed: res.cp.counts.failed, Scanned: res.cp.counts.scanned}
	if u.slot == lease.Slot() {
		counts = lock.UnitCounts{}
	}
	for _, unit := range u.units {
		end := lock.UnitEnd{Cursor: cursors[unit], Dirty: res.cp.dirty, Thief: counts}
		if err := lease.FinishUnit(wctx, u.marks, unit, end); err != nil {
			return res, err
		}
		counts = lock.UnitCounts{}
	}
	return res, nil
}

// cursors splits a unit pass's scan position into one position per unit.
func (u *unitRun) cursors(position string) (map[int]string, error) {
	out := map[int]string{}
	if position == "" {
		return out, nil
	}
	pos, err := scan.DecodeCheckpoint(position)
	if err != nil {
		return nil, err
	}
	for _, c := range pos.Cursors {
		one := pos
		one.Cursors = []scan.Cursor{c}
		if out[c.Segment], err = scan.EncodeCheckpoint(one); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// saveCursors saves a unit pass's position on its units' markers (those whose cursor moved).
func (u *unitRun) saveCursors(ctx context.Context, w *Worker, lease *lock.Lease, position string) error {
	cursors, err := u.cursors(position)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	wctx, cancel := w.markerWriteContext(ctx, lease)
	defer cancel()
	var errs []error
	for _, unit := range u.units {
		c, ok := cursors[unit]
		if !ok || c == u.saved[unit] {
			continue
		}
		if err := lease.SaveUnitCursor(wctx, u.marks, unit, c); err != nil {
			errs = append(errs, err)
			continue
		}
		u.saved[unit] = c
	}
	err = errors.Join(errs...)
	if err != nil && lease.Context().Err() == nil {
		w.cfg.Logger.Warn("dynapart: save the position of stolen units", "units", u.units, "err", err)
	}
	return err
}

// markerWriteContext is for a marker write made under lease: it outlives ctx's cancellation (a
// stop saves the position) but is never sent once the lease has ended.
func (w *Worker) markerWriteContext(ctx context.Context, lease *lock.Lease) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithTimeout(lease.Context(), w.cfg.LeaseWriteTimeout)
	return ledger.WithFence(wctx, lease.Context()), cancel
}

// save saves the pass's position: on the slot's lease, or for a unit pass on its units' markers.
func (p *pass) save(cp slotCheckpoint) error {
	if p.unit != nil {
		return p.unit.saveCursors(p.ctx, p.w, p.lease, cp.scan)
	}
	return p.w.saveCheckpoint(p.ctx, p.lease, cp.encode())
}
