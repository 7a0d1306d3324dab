package worker

import (
	"log/slog"
	"slices"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// Work stealing (once-workers). A scan unit is a segment (segment mode), a segment read with a
// slot's filter (filter mode) or a shard (index mode). A once-worker marks each unit of its pass
// before its scanner starts it: a conditional put of the unit's marker (lock.Lease.MarkUnit) naming
// its slot lease. A marker of its own slot under an older token (an earlier holder, ended) it takes
// over; a marker held by another slot's lease (a thief) makes its scanner skip the unit. What a
// pass reads, and how it meets thieves, is its share (share.go: markedShare is the owner's side).
//
// A once-worker whose slot is finished (and that found no free unfinished slot to take) keeps its
// finished slot's lease and steals: it reads the group (GroupStatus; each holder's checkpoint
// names its pass), picks the slot with the most units neither started nor marked, and marks the
// last few of them (the owner reads from the front; up to SubSegments units, at most a third of
// those left). It reads them with the owner's plan and filter under its own lease (claims and
// completions fenced by it as in any pass), saving each unit's cursor on its marker every
// CheckpointInterval, and sets done (and dirty when an item needs another pass) at the end (a unit
// pass: unitRun, unitpass.go). It steals (slot.steal, below) until no slot has such a unit, then
// releases its lease.
//
// The owner's pass is complete only when every unit a thief took is done (markedShare.reconcile):
// it ORs the thief's dirty into its own and adds the thief's done, failed and scanned counts to
// its slot's; it polls (StandbyPoll) while the thief's lease is live (same token, held by the
// lock's rules); a thief whose lease ended (expired past MaxClockSkew, released, or its slot taken again) it
// replaces: it takes the marker over and reads the unit from the marker's cursor. An owner that
// dies leaves its markers to its slot's next holder, which resumes the pass from the slot's
// checkpoint and finds them.
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

// victim is a slot a thief may take units from: the checkpoint of its pass, the pass's markers
// and the units neither started nor marked, in the slot's order.
type victim struct {
	slot  int
	cp    slotCheckpoint
	marks markerSet
	free  []int
}

// steal takes units from slots still working, a few at a time, until none is left to take, a free
// unfinished slot appears (Run, helping, takes it), the group is resized, or ctx or the lease
// ends. A failure ends stealing: a unit it held is then taken back by its owner once the lease is
// released.
func (s *slot) steal() {
	for !s.stopped() {
		if s.pastStop() {
			return
		}
		st, err := s.e.locks.GroupStatus(s.ctx, s.w.cfg.Group)
		if err != nil || st.Epoch != s.lease.Epoch() || freeSlot(st) {
			return
		}
		v, ok := s.pickVictim(st)
		if !ok {
			return
		}
		units, err := s.markToSteal(v)
		switch {
		case err != nil:
			s.log.Warn("dynapart: mark units to steal", "err", err)
			return
		case len(units) == 0:
			continue // their owner (or another thief) got there first
		}
		logSteal(s.log, v, units)
		u := newUnitRun(v.marks, v.slot, units)
		u.plan, u.of = s.w.scanPlan(s.e, st.N), v.cp
		if _, err := s.runUnitPass(u); err != nil {
			if !s.stopped() {
				s.log.Warn("dynapart: reading stolen units failed; their owner takes them back", "victim", v.slot, "units", units, "err", err)
			}
			return
		}
		s.w.stats.stolen.Add(int64(len(units)))
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
func (s *slot) pickVictim(st *lock.GroupStatus) (victim, bool) {
	var best victim
	for _, ss := range st.Slots {
		if ss.Slot >= st.N || ss.Slot == s.lease.Slot() || !ss.Held || ss.Finished || ss.Epoch != st.Epoch {
			continue
		}
		v, ok := s.victimOf(st, ss)
		if ok && len(v.free) > len(best.free) {
			best = v
		}
	}
	return best, len(best.free) > 0
}

// victimOf reads slot s's pass: its checkpoint's position and the pass's markers.
func (s *slot) victimOf(st *lock.GroupStatus, of lock.SlotStatus) (victim, bool) {
	cp, err := decodeSlotCheckpoint(of.Checkpoint)
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
	v := victim{slot: of.Slot, cp: cp, marks: s.w.markerSet(cp.epoch, of.Slot, cp.pass, cp.run)}
	ms, err := s.e.locks.UnitMarkers(s.ctx, v.marks)
	if err != nil {
		return victim{}, false
	}
	marking := false
	for _, m := range ms {
		marking = marking || m.Slot == of.Slot
	}
	if !marking {
		return victim{}, false // the holder does not mark its units (not a once-worker), or has not begun
	}
	for _, u := range s.w.units(s.e, s.w.scanPlan(s.e, st.N), of.Slot) {
		if _, marked := ms[u]; !marked && !started[u] {
			v.free = append(v.free, u)
		}
	}
	return v, true
}

// markToSteal marks for lease the units a thief takes from v at once: the last of v's free units,
// up to SubSegments of them (read in parallel like a slot's) but at most a third of them, so the
// owner and other thieves keep a share. It returns those it got.
func (s *slot) markToSteal(v victim) ([]int, error) {
	k := max(1, min(s.w.cfg.SubSegments, len(v.free)/3))
	wctx, cancel := s.markerWriteContext()
	defer cancel()
	var got []int
	for _, u := range slices.Backward(v.free[len(v.free)-k:]) {
		taken, _, err := s.lease.MarkUnit(wctx, v.marks, u)
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
