package worker

import (
	"context"
	"errors"
	"sync"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// unitRun is the units a unit pass reads: units of slot's share under plan, whose markers (in
// marks) name the pass's lease, read from cursor ("" from their beginning; a position of the
// scanner restricted to them). of is the checkpoint of the pass the units belong to (its plan
// epoch and n). It saves each unit's cursor on its marker (see steal.go).
type unitRun struct {
	marks  markerSet
	slot   int
	units  []int
	plan   scan.Plan
	of     slotCheckpoint
	cursor string

	mu    sync.Mutex
	saved map[int]string // the cursor last saved per unit
}

func newUnitRun(marks markerSet, slot int, units []int) *unitRun {
	return &unitRun{marks: marks, slot: slot, units: units, saved: map[int]string{}}
}

func (u *unitRun) scanConfig(_ *pass, cfg *scan.Config) {
	cfg.Slot, cfg.Only, cfg.Plan = u.slot, u.units, u.plan
}

func (u *unitRun) save(p *pass, cp slotCheckpoint) error { return u.saveCursors(p.slot, cp.scan) }

func (u *unitRun) position(pos string) string { return pos }

func (u *unitRun) whole() bool { return false }

func (u *unitRun) settle(*pass, bool) (bool, error) { return false, nil }

// runUnitPass reads u's units under the slot's lease and marks them done (with the pass's dirty)
// on their markers.
func (s *slot) runUnitPass(u *unitRun) (passResult, error) {
	from := slotCheckpoint{epoch: u.of.epoch, n: u.of.n, pass: u.of.pass, scan: u.cursor}
	res, err := s.newPass(from, u).run()
	if err != nil {
		return res, err
	}
	wctx, cancel := s.markerWriteContext()
	defer cancel()
	cursors, err := u.cursors(res.cp.scan)
	if err != nil {
		return res, err
	}
	// A thief's counts go on the first unit's marker, for the owner to add to its slot's; the
	// owner's own unit pass counts them in its pass directly.
	counts := lock.UnitCounts{Done: res.cp.counts.done, Failed: res.cp.counts.failed, Scanned: res.cp.counts.scanned}
	if u.slot == s.lease.Slot() {
		counts = lock.UnitCounts{}
	}
	for _, unit := range u.units {
		end := lock.UnitEnd{Cursor: cursors[unit], Dirty: res.cp.dirty, Thief: counts}
		if err := s.lease.FinishUnit(wctx, u.marks, unit, end); err != nil {
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
func (u *unitRun) saveCursors(s *slot, position string) error {
	cursors, err := u.cursors(position)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	wctx, cancel := s.markerWriteContext()
	defer cancel()
	var errs []error
	for _, unit := range u.units {
		c, ok := cursors[unit]
		if !ok || c == u.saved[unit] {
			continue
		}
		if err := s.lease.SaveUnitCursor(wctx, u.marks, unit, c); err != nil {
			errs = append(errs, err)
			continue
		}
		u.saved[unit] = c
	}
	err = errors.Join(errs...)
	if err != nil && s.lease.Context().Err() == nil {
		s.w.cfg.Logger.Warn("dynapart: save the position of stolen units", "units", u.units, "err", err)
	}
	return err
}

// markerWriteContext is for a marker write made under the slot's lease: it outlives the slot's
// ctx (a stop saves the position) but is never sent once the lease has ended.
func (s *slot) markerWriteContext() (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithTimeout(s.lease.Context(), s.w.cfg.LeaseWriteTimeout)
	return ledger.WithFence(wctx, s.lease.Context()), cancel
}
