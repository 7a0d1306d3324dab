package worker

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// Work stealing (once-workers). A scan unit is a segment (segment mode), a segment read with a
// slot's filter (filter mode) or a shard (index mode). A once-worker marks each unit of its pass
// before its scanner starts it: a conditional put of the unit's marker (lock.Lease.MarkUnit) naming
// its slot lease. A marker of its own slot under an older token (an earlier holder, ended) it takes
// over; a marker held by another slot's lease (a thief) makes its scanner skip the unit.
//
// A once-worker whose slot is finished (and that found no free unfinished slot to take) keeps its
// finished slot's lease and steals: it reads the group (GroupStatus; each holder's checkpoint
// names its pass), picks the slot with the most units neither started nor marked, and marks the
// last few of them (the owner reads from the front; up to SubSegments units, at most a third of
// those left). It reads them with the owner's plan and filter under its own lease (claims and
// completions fenced by it as in any pass), saving each unit's cursor on its marker every
// CheckpointInterval, and sets done (and dirty when an item needs another pass) at the end. It
// steals until no slot has such a unit, then releases its lease.
//
// The owner's pass is complete only when every unit a thief took is done (reconcile): it ORs the
// thief's dirty into its own and adds the thief's done, failed and scanned counts to its slot's;
// it polls (StandbyPoll) while the thief's lease is live (same token, held by the lock's rules); a
// thief whose lease ended (expired past MaxClockSkew, released, or its slot taken again) it
// replaces: it takes the marker over and reads the unit from the marker's cursor. An owner that dies leaves its markers to its slot's next holder, which resumes the pass
// from the slot's checkpoint and finds them.
//
// A resize ends stealing like any pass; the next plan composes its cursors from slot checkpoints
// only, so a unit a thief had begun is read again from its owner's position (reads only: its items
// done are skipped without a handler call).

// marksUnits reports whether the worker marks the units of its passes under plan: every
// once-worker (also with NoSteal, so that other workers' stealing stays exclusive) of a plan of
// more than one slot. Units are stolen only among the slots of one plan (a resize starts a new
// plan, whose thieves never read an older plan's passes), so a plan of one slot has no thief, and
// its passes write no markers.
func (w *Worker) marksUnits(plan scan.Plan) bool { return w.cfg.Once && plan.Slots > 1 }

// steals reports whether the worker steals units once its slot is finished.
func (w *Worker) steals() bool { return w.cfg.Once && !w.cfg.NoSteal }

// stealsIn reports whether a slot of plan keeps its lease after finishing, to steal from the
// plan's other slots: a one-slot plan has none.
func (w *Worker) stealsIn(plan scan.Plan) bool { return w.steals() && plan.Slots > 1 }

// beforeUnit is the scanner's BeforeSegment in a once-worker's pass: it marks the unit for the
// slot's lease, and skips units a thief holds (reconcile waits for them) or that are done.
func (p *pass) beforeUnit(ctx context.Context, unit int) (bool, error) {
	wctx, cancel := p.writeContext()
	defer cancel()
	taken, cur, err := p.lease.MarkUnit(wctx, *p.marks, unit)
	switch {
	case err != nil:
		return false, err
	case taken, cur.HeldBy(p.lease) && !cur.Done:
		return true, nil
	case cur.Done:
		// Read to its end by a thief (or by this slot's earlier holder after a thief died).
		p.unitDone(cur)
		return false, nil
	case cur.Slot == p.lease.Slot() && cur.Token < p.lease.Token():
		// An earlier holder of this slot (ended) was reading it: resume it from the checkpoint.
		ok, err := p.lease.TakeOverUnit(wctx, *p.marks, cur)
		if err == nil && !ok {
			err = errors.New("dynapart: a unit marker of this slot changed under its holder")
		}
		return ok, err
	}
	p.mu.Lock()
	p.stolen = append(p.stolen, unit)
	p.mu.Unlock()
	return false, nil
}

// unitDone takes in, once, a unit another lease read to its end: its dirty, the thief's counts, and
// the unit done in the slot's checkpoint.
func (p *pass) unitDone(m lock.UnitMarker) {
	p.mu.Lock()
	seen := p.stolenDone[m.Unit]
	if p.stolenDone == nil {
		p.stolenDone = map[int]bool{}
	}
	p.stolenDone[m.Unit] = true
	p.mu.Unlock()
	if seen {
		return
	}
	if m.Dirty {
		p.dirty.Store(true)
	}
	p.counts.done.Add(m.Thief.Done)
	p.counts.failed.Add(m.Thief.Failed)
	p.counts.scanned.Add(m.Thief.Scanned)
}

// takeStolenDone reads the markers of the units thieves took from a pass that stopped, and takes in
// those done (see unitDone); it reports whether there were any.
func (p *pass) takeStolenDone() bool {
	stolen := p.stolenUnits()
	if len(stolen) == 0 {
		return false
	}
	wctx, cancel := p.w.markerWriteContext(p.ctx, p.lease)
	defer cancel()
	ms, err := p.e.locks.UnitMarkers(wctx, *p.marks)
	if err != nil {
		return false
	}
	found := false
	for _, u := range stolen {
		if m, ok := ms[u]; ok && m.Done {
			p.unitDone(m)
			found = true
		}
	}
	return found
}

// withStolenDone is the scan position pos with the units other leases read to their end marked
// done (the scanner skipped them).
func (p *pass) withStolenDone(pos string) string {
	p.mu.Lock()
	done := maps.Clone(p.stolenDone)
	p.mu.Unlock()
	if len(done) == 0 || pos == "" {
		return pos
	}
	dp, err := scan.DecodeCheckpoint(pos)
	if err != nil {
		return pos
	}
	for i, c := range dp.Cursors {
		if done[c.Segment] {
			dp.Cursors[i] = scan.Cursor{TotalSegments: c.TotalSegments, Segment: c.Segment, Done: true}
		}
	}
	out, err := scan.EncodeCheckpoint(dp)
	if err != nil {
		return pos
	}
	return out
}

func (p *pass) stolenUnits() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.stolen)
}

// reconcile waits until every unit a thief took from this pass is done, reading itself the units
// of thieves whose lease ended (see the top of the file).
func (p *pass) reconcile() error {
	c := p.w.cfg
	pending := p.stolenUnits()
	for {
		ms, err := p.e.locks.UnitMarkers(p.fetchCtx, *p.marks)
		if err != nil {
			return err
		}
		var st *lock.GroupStatus
		var left []int
		for _, u := range pending {
			m, ok := ms[u]
			switch {
			case !ok:
				return errors.New("dynapart: a unit a thief took has no marker")
			case m.Done:
				p.unitDone(m)
				continue
			case !m.HeldBy(p.lease):
				if st == nil {
					if st, err = p.e.locks.GroupStatus(p.fetchCtx, c.Group); err != nil {
						return err
					}
				}
				if markerLive(m, st) {
					left = append(left, u)
					continue
				}
				if took, err := p.lease.TakeOverUnit(p.fetchCtx, *p.marks, m); err != nil || !took {
					left = append(left, u) // changed meanwhile: look again
					continue
				}
			}
			c.Logger.Info("dynapart: reading a unit a thief left unfinished", "slot", p.lease.Slot(), "unit", u)
			if err := p.readOwnUnit(m); err != nil {
				return err
			}
		}
		if len(left) == 0 {
			return nil
		}
		pending = left
		select {
		case <-p.fetchCtx.Done():
			return p.fetchCtx.Err()
		case <-c.Clock.After(c.StandbyPoll):
		}
	}
}

// markerLive reports whether the lease a marker names is still held (by the lock's rules).
func markerLive(m lock.UnitMarker, st *lock.GroupStatus) bool {
	if m.Slot < 0 || m.Slot >= len(st.Slots) {
		return false
	}
	s := st.Slots[m.Slot]
	return s.Token == m.Token && s.Held
}

// readOwnUnit reads unit m.Unit of the pass's own slot from the marker's cursor (the owner's
// reading of a unit a thief left) and marks it done; its counts and dirty join the pass's.
func (p *pass) readOwnUnit(m lock.UnitMarker) error {
	u := newUnitRun(*p.marks, p.lease.Slot(), []int{m.Unit})
	res, err := p.w.runUnitPass(p.ctx, p.e, p.lease, p.h, p.plan, p.cp, u, m.Cursor, p.stopAt)
	p.counts.scanned.Add(res.cp.counts.scanned)
	p.counts.done.Add(res.cp.counts.done)
	p.counts.failed.Add(res.cp.counts.failed)
	if err != nil {
		return err
	}
	if res.cp.dirty {
		p.dirty.Store(true)
	}
	p.mu.Lock()
	if p.stolenDone == nil {
		p.stolenDone = map[int]bool{}
	}
	p.stolenDone[m.Unit] = true // counted above
	p.mu.Unlock()
	return nil
}

// victim is a slot a thief may take units from: the checkpoint of its pass, the pass's markers
// and the units neither started nor marked, in the slot's order.
type victim struct {
	slot  int
	cp    slotCheckpoint
	marks markerSet
	free  []int
}

// steal takes units from slots still working, a few at a time, until none is left to take, a free
// unfinished slot appears (Run's helping takes it), the group is resized, or ctx or the lease
// ends. A failure ends stealing: a unit it held is then taken back by its owner once the lease is
// released.
func (w *Worker) steal(ctx context.Context, e *env, lease *lock.Lease, h Handler, stopAt time.Time, log *slog.Logger) {
	for ctx.Err() == nil && lease.Context().Err() == nil {
		if !stopAt.IsZero() && !w.cfg.Clock.Now().Before(stopAt) {
			return
		}
		st, err := e.locks.GroupStatus(ctx, w.cfg.Group)
		if err != nil || st.Epoch != lease.Epoch() || freeSlot(st) {
			return
		}
		v, ok := w.pickVictim(ctx, e, st, lease.Slot())
		if !ok {
			return
		}
		units, err := w.markToSteal(ctx, lease, v)
		switch {
		case err != nil:
			log.Warn("dynapart: mark units to steal", "err", err)
			return
		case len(units) == 0:
			continue // their owner (or another thief) got there first
		}
		logSteal(log, v, units)
		u := newUnitRun(v.marks, v.slot, units)
		if _, err := w.runUnitPass(ctx, e, lease, h, w.scanPlan(e, st.N), v.cp, u, "", stopAt); err != nil {
			if ctx.Err() == nil && lease.Context().Err() == nil {
				log.Warn("dynapart: reading stolen units failed; their owner takes them back", "victim", v.slot, "units", units, "err", err)
			}
			return
		}
		w.stats.stolen.Add(int64(len(units)))
	}
}

// freeSlot reports whether a slot of the group's plan is neither held nor finished.
func freeSlot(st *lock.GroupStatus) bool {
	for _, s := range st.Slots {
		if s.Slot < st.N && !s.Held && !s.Finished {
			return true
		}
	}
	return false
}

// pickVictim is the slot with the most units to take (ok false when none has one): held and
// unfinished under the group's plan, its checkpoint naming a pass of that plan whose markers show
// it marks its units.
func (w *Worker) pickVictim(ctx context.Context, e *env, st *lock.GroupStatus, mine int) (victim, bool) {
	var best victim
	for _, s := range st.Slots {
		if s.Slot >= st.N || s.Slot == mine || !s.Held || s.Finished || s.Epoch != st.Epoch {
			continue
		}
		v, ok := w.victimOf(ctx, e, st, s)
		if ok && len(v.free) > len(best.free) {
			best = v
		}
	}
	return best, len(best.free) > 0
}

// victimOf reads slot s's pass: its checkpoint's position and the pass's markers.
func (w *Worker) victimOf(ctx context.Context, e *env, st *lock.GroupStatus, s lock.SlotStatus) (victim, bool) {
	cp, err := decodeSlotCheckpoint(s.Checkpoint)
	if err != nil || cp.run == 0 || cp.epoch != st.Epoch || cp.n != st.N {
		return victim{}, false
	}
	started := map[int]bool{}
	if cp.scan != "" {
		pos, err := scan.DecodeCheckpoint(cp.scan)
		if err != nil {
			return victim{}, false
		}
		for _, c := range pos.Cursors {
			started[c.Segment] = c.Done || len(c.LastEvaluatedKey) > 0
		}
	}
	v := victim{slot: s.Slot, cp: cp, marks: w.markerSet(cp.epoch, s.Slot, cp.pass, cp.run)}
	ms, err := e.locks.UnitMarkers(ctx, v.marks)
	if err != nil {
		return victim{}, false
	}
	marking := false
	for _, m := range ms {
		marking = marking || m.Slot == s.Slot
	}
	if !marking {
		return victim{}, false // the holder does not mark its units (not a once-worker), or has not begun
	}
	for _, u := range w.units(e, w.scanPlan(e, st.N), s.Slot) {
		if _, marked := ms[u]; !marked && !started[u] {
			v.free = append(v.free, u)
		}
	}
	return v, true
}

// markToSteal marks for lease the units a thief takes from v at once: the last of v's free units,
// up to SubSegments of them (read in parallel like a slot's) but at most a third of them, so the
// owner and other thieves keep a share. It returns those it got.
func (w *Worker) markToSteal(ctx context.Context, lease *lock.Lease, v victim) ([]int, error) {
	k := max(1, min(w.cfg.SubSegments, len(v.free)/3))
	wctx, cancel := w.markerWriteContext(ctx, lease)
	defer cancel()
	var got []int
	for _, u := range slices.Backward(v.free[len(v.free)-k:]) {
		taken, _, err := lease.MarkUnit(wctx, v.marks, u)
		if err != nil {
			return got, err
		}
		if taken {
			got = append(got, u)
		}
	}
	return got, nil
}

// logSteal is the log of a thief.
func logSteal(log *slog.Logger, v victim, units []int) {
	log.Info("dynapart: stealing units of a slot still working", "victim", v.slot, "units", units, "left", len(v.free)-len(units))
}
