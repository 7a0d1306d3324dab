package worker

import (
	"fmt"
	"slices"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// planStart is where every unit of the group stood when a plan epoch began: the first holder of an
// epoch past the barrier composes it from the latest earlier epoch's planStart and the checkpoints
// made since, and stores it in the lease table before any holder of the epoch writes a checkpoint
// (lock.PlanStart says why, and how it is stored).
type planStart = lock.PlanStart

// planStartFor returns the planStart of the slot's lease's epoch, composing and storing it when no
// holder of the epoch has yet.
func (s *slot) planStartFor() (planStart, error) {
	w, e, ctx, epoch := s.w, s.e, s.ctx, s.lease.Epoch()
	if ps, ok, err := e.locks.PlanStart(ctx, w.cfg.Group, epoch); err != nil || ok {
		return ps, err
	}
	st, err := e.locks.GroupStatus(ctx, w.cfg.Group)
	if err != nil {
		return planStart{}, err
	}
	sources := w.planSources(e, st)
	// The latest earlier planStart is not always epoch-1's: an epoch none of whose holders got
	// past the barrier has none, and the positions the one before it holds for units no slot
	// checkpoint speaks for since must not be lost. Checkpoints made under the epochs in between
	// rank above it (see latestOwner).
	prev, prevEpoch, ok, err := e.locks.LatestPlanStart(ctx, w.cfg.Group, epoch)
	if err != nil {
		return planStart{}, err
	}
	// A plan start recorded before the group's last reset (lock.ResetGroup) is the previous run's.
	if ok && prevEpoch >= st.ResetEpoch {
		src, err := w.planStartSource(e, prev, prevEpoch)
		if err != nil {
			return planStart{}, err
		}
		sources = append(sources, src)
	}
	ps, err := w.composeStart(e, sources)
	if err != nil {
		return planStart{}, err
	}
	return s.lease.StorePlanStart(ctx, ps)
}

// composeStart takes every unit's cursor from its latest owner among sources.
func (w *Worker) composeStart(e *env, sources []planSource) (planStart, error) {
	var ps planStart
	var cursors []scan.Cursor
	for u := range w.totalUnits(e) {
		src := latestOwner(sources, u)
		if src == nil {
			continue
		}
		ps.Pass = max(ps.Pass, src.pass)
		if src.dirty(u) {
			ps.Dirty = append(ps.Dirty, u)
		}
		if src.pos == nil {
			continue
		}
		if c, ok := src.pos.Cursor(u); ok {
			cursors = append(cursors, c)
		}
	}
	var err error
	ps.Scan, err = scan.EncodeCheckpoint(w.position(e, cursors))
	return ps, err
}

// position is a scan position of the group's table and mode holding cursors.
func (w *Worker) position(e *env, cursors []scan.Cursor) scan.Position {
	pos := scan.Position{Table: w.cfg.Table, Mode: w.cfg.Mode, TotalSegments: w.totalUnits(e), Cursors: cursors}
	if w.cfg.Mode == scan.ModeIndex {
		pos.Index = w.cfg.IndexName
	}
	return pos
}

// planStartSource is a planStart as a source of unit positions: it speaks for every unit, below
// the checkpoints made under its epoch (which started from it).
func (w *Worker) planStartSource(e *env, ps planStart, epoch int64) (planSource, error) {
	pos, err := scan.DecodeCheckpoint(ps.Scan)
	if err != nil {
		return planSource{}, fmt.Errorf("dynapart: the plan start of epoch %d: %w", epoch, err)
	}
	all := make([]int, w.totalUnits(e))
	for i := range all {
		all[i] = i
	}
	dirty := ps.Dirty
	return planSource{epoch: epoch, rank: 0, units: all, pos: &pos, pass: ps.Pass,
		dirty: func(u int) bool { return slices.Contains(dirty, u) }}, nil
}

// startFrom is the slot's checkpoint under plan, from the epoch's planStart.
func (w *Worker) startFrom(e *env, ps planStart, units []int, out slotCheckpoint) (slotCheckpoint, error) {
	pos, err := scan.DecodeCheckpoint(ps.Scan)
	if err != nil {
		return slotCheckpoint{}, fmt.Errorf("dynapart: the plan start: %w", err)
	}
	var cursors []scan.Cursor
	for _, u := range units {
		if c, ok := pos.Cursor(u); ok {
			cursors = append(cursors, c)
		}
		out.dirty = out.dirty || slices.Contains(ps.Dirty, u)
	}
	out.pass = max(out.pass, ps.Pass)
	out.scan, err = scan.EncodeCheckpoint(w.position(e, cursors))
	return out, err
}
