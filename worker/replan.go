package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// A group's plan is its slot count n, its plan epoch (moved on by every resize, see
// lock.Client.ResizeGroup) and its scan units: the parallel-scan segments (segment and filter mode,
// a count fixed when the group is created) or the index shards (index mode). Under n, slot k owns
// the units scan.Plan assigns it (segment mode: a contiguous block of segments; index mode: the
// shards s with s % n == k; filter mode: every segment, keeping the items that map to k).
//
// Changing plans. A holder reads the meta item once per heartbeat (watchGroup); when the epoch has
// moved past its lease's, it stops claiming as on a shutdown (handlers in flight finish, batch
// claims not started are given back), saves its checkpoint, releases the slot and takes a slot
// again at the group's current n. A holder whose lease is of a newer epoch than its checkpoint
// first waits until no slot is held under an older epoch (waitOldPlan: old holders stop within a
// heartbeat; a frozen one is waited out like any expired lease), so the old and the new plan never
// read the same unit at once. It then composes its position (adoptPlan): for each unit it owns,
// the cursor of the latest checkpoint made by that unit's owner (the checkpoint records the epoch
// and n it was made under), so segment and index mode read nothing again beyond the pages that
// were not acknowledged. Filter mode's split of the items depends on n, so a new plan rescans the
// slot's share from the start: items already done are skipped without a handler call. Because a
// slot's new checkpoint overwrites the one the old plan left there, the positions are composed once
// per epoch, before any holder of it writes a checkpoint, into a planStart (planstart.go; package
// lock stores it: lock.PlanStart).

// errReplan is the cause a slot's run ends with when the group was resized.
var errReplan = errors.New("dynapart: the group was resized")

// leasePlan is the scan plan of a lease: the group's n at the lease's epoch. errReplan when the
// group has moved on to a newer plan since the lease was taken. It reads the group after the
// take, unless the acquisition did (it created the group's meta item after winning the slot, or
// found one created meanwhile): that read stands, unless it shows a pause, whose first read the
// worker orders with its other reads (applyGroup).
func (s *slot) leasePlan() (scan.Plan, error) {
	st, ok := s.lease.GroupAfterTake()
	if !ok || st.Paused {
		read := s.w.pause.nextRead()
		var err error
		if st, err = s.e.locks.GroupState(s.ctx, s.w.cfg.Group); err != nil {
			return scan.Plan{}, err
		}
		s.applyGroup(read, st) // the slot's first read of the group: a pause holds the first pass
	}
	if !st.Exists || st.Epoch != s.lease.Epoch() || st.N < 1 {
		return scan.Plan{}, errReplan
	}
	return s.w.scanPlan(s.e, st.N), nil
}

// scanPlan is the plan of the group at n slots.
func (w *Worker) scanPlan(e *env, n int) scan.Plan {
	return scan.Plan{Mode: w.cfg.Mode, Slots: n, SubSegments: w.cfg.SubSegments, Total: e.total}
}

// waitOldPlan waits until no slot of the group is held under a plan epoch older than the lease's.
func (s *slot) waitOldPlan() error {
	c, lease := s.w.cfg, s.lease
	logged := false
	for {
		held, err := s.e.locks.OldPlanHolders(s.ctx, c.Group, lease.Epoch())
		switch {
		case err == nil && len(held) == 0:
			return nil
		case err != nil:
			c.Logger.Warn("dynapart: read the group to wait for the old plan", "slot", lease.Slot(), "err", err)
		case !logged:
			c.Logger.Info("dynapart: waiting for the slots of the old plan to stop", "slot", lease.Slot(), "epoch", lease.Epoch(), "held", held)
			logged = true
		}
		select {
		case <-s.ctx.Done():
			return context.Cause(s.ctx)
		case <-lease.Done():
			return lease.Context().Err()
		case <-c.Clock.After(c.StandbyPoll):
		}
	}
}

// planSource is something that tells where units stood: a slot checkpoint (rank 1: the units its
// slot owned under the n it was made under) or a planStart (rank 0: every unit, as the epoch
// began). pos nil: the units start from the beginning.
type planSource struct {
	epoch int64
	rank  int
	units []int
	pos   *scan.Position
	pass  int
	dirty func(u int) bool
}

// adoptPlan composes the checkpoint the slot starts from under its plan (see the top of this file)
// from the epoch's planStart; own is the slot's own checkpoint, whose done and failed counts are
// kept.
func (s *slot) adoptPlan(own slotCheckpoint) (slotCheckpoint, error) {
	w, e := s.w, s.e
	out := slotCheckpoint{epoch: s.lease.Epoch(), n: s.plan.Slots, pass: own.pass,
		counts: slotCounts{done: own.counts.done, failed: own.counts.failed}}
	rescan, since, err := s.groupRescans(own)
	out.counts.since = since
	switch {
	case err != nil:
		return slotCheckpoint{}, err
	case rescan:
		out.scan = rescanMark // the whole table, this slot's new share with it (follow_trim.go)
		return out, nil
	case w.cfg.Mode == scan.ModeFilter:
		return out, nil // filter mode rescans the share under the new n
	}
	ps, err := s.planStartFor()
	if err != nil {
		return slotCheckpoint{}, err
	}
	if out, err = w.startFrom(e, ps, w.units(e, s.plan, s.lease.Slot()), out); err != nil {
		return slotCheckpoint{}, fmt.Errorf("dynapart: compose the slot's position under the new plan: %w", err)
	}
	return out, nil
}

// planSources decodes the group's slot checkpoints that were made under a known plan, since the
// group's last reset, and fit this table and mode; others (older formats, another table, the run
// before a reset) are left out: their units are read again.
func (w *Worker) planSources(e *env, st *lock.GroupStatus) []planSource {
	var out []planSource
	for _, s := range st.Slots {
		cp, err := decodeSlotCheckpoint(s.Checkpoint)
		if err != nil || cp.n < 1 || s.Checkpoint == "" || cp.n > w.maxSlots(e) || cp.epoch < st.ResetEpoch {
			continue
		}
		src := planSource{epoch: cp.epoch, rank: 1, units: w.units(e, w.scanPlan(e, cp.n), s.Slot), pass: cp.pass,
			dirty: func(int) bool { return cp.dirty }}
		if cp.scan != "" {
			pos, err := scan.DecodeCheckpoint(cp.scan)
			if err != nil || pos.Table != w.cfg.Table || pos.Mode != w.cfg.Mode || pos.TotalSegments != w.totalUnits(e) {
				continue
			}
			src.pos = &pos
		}
		out = append(out, src)
	}
	return out
}

// maxSlots is the most slots the group's units allow (a checkpoint claiming more is not ours).
func (w *Worker) maxSlots(e *env) int {
	if w.cfg.Mode == scan.ModeSegment {
		return e.total
	}
	return math.MaxInt
}

// latestOwner is the source with the highest (epoch, rank) that speaks for unit u; nil when none.
func latestOwner(sources []planSource, u int) *planSource {
	var best *planSource
	for i := range sources {
		s := &sources[i]
		if !slices.Contains(s.units, u) {
			continue
		}
		if best == nil || s.epoch > best.epoch || (s.epoch == best.epoch && s.rank > best.rank) {
			best = s
		}
	}
	return best
}

// units are the scan units slot owns under plan: its segments, or in index mode its shards.
func (w *Worker) units(e *env, plan scan.Plan, slot int) []int {
	if w.cfg.Mode != scan.ModeIndex {
		return plan.Segments(slot)
	}
	var out []int
	for s := slot; s < w.cfg.Shards; s += plan.Slots {
		out = append(out, s)
	}
	return out
}

// totalUnits is the TotalSegments of the group's scan positions: the segment count, or the shard
// count in index mode.
func (w *Worker) totalUnits(e *env) int {
	if w.cfg.Mode == scan.ModeIndex {
		return w.cfg.Shards
	}
	return e.total
}
