package worker

import (
	"context"

	"github.com/dynapart/dynapart/lock"
)

// This file holds HandleRecords' part in the group's pause and budget: a call keeps no watch on the
// group, so it checks the group's state once (the start's read while it is fresh) and reports its
// usage at its end on a budgeted group.

// groupPaused checks the group's state (recordsGroupState) for HandleRecords, which keeps no
// watch on it: a paused group (by an operator, or at its budget) handles nothing, and the caller
// has every change delivered again until it is resumed. A group at its budget but not paused
// (resumed without a raise) is paused here. Config.MaxWCU and MaxRCU are recorded when the group
// has no budget (an invocation's config does not lower or raise one: resume --max-wcu does). A
// failed read is logged and does not pause. budgeted is false when the group has no budget as
// read: the call then reports its usage only if it runs a BudgetInterval or longer (HandleRecords).
func (s *slot) groupPaused(ctx context.Context) (paused, budgeted bool, err error) {
	w := s.w
	rctx, cancel := context.WithTimeout(s.lease.Context(), w.cfg.LeaseWriteTimeout)
	defer cancel()
	st, err := s.recordsGroupState(rctx)
	budgeted = err != nil || st.Budget.Set() || w.cfg.MaxWCU > 0 || w.cfg.MaxRCU > 0
	if err != nil {
		st.Paused = false
		w.cfg.Logger.Warn("dynapart: read the group's meta item", "slot", s.lease.Slot(), "err", err)
	} else if !st.Budget.Set() {
		if err := w.recordBudget(ctx, s.e); err != nil {
			return false, true, err
		}
	}
	return w.pauseAsFound(rctx, s.e, st), budgeted, nil
}

// pausedAtStart reports whether the start's read of the group found it paused, or at its budget
// (see pauseAsFound): HandleRecords then handles nothing and takes no slot, so each redelivery of
// a paused group's batch costs the start's reads and no write.
func (w *Worker) pausedAtStart(ctx context.Context, e *env) bool {
	st := e.started
	if !st.Exists || !st.Paused && !st.Budget.Reached() {
		return false
	}
	pctx, cancel := w.leaseWriteContext(ctx)
	defer cancel()
	return w.pauseAsFound(pctx, e, st)
}

// pauseAsFound is whether HandleRecords finds the group in st paused: paused by an operator or at
// its budget, or at its budget but not paused (resumed without a raise, or an earlier pause
// failed), which it pauses. It keeps the worker's pause state as the call found it.
func (w *Worker) pauseAsFound(ctx context.Context, e *env, st lock.GroupState) bool {
	if !st.Paused && st.Budget.Reached() {
		if _, err := e.locks.PauseForBudget(ctx, w.cfg.Group); err != nil {
			w.cfg.Logger.Warn("dynapart: pause the group at its budget", "err", err)
		}
		st.Paused = true
	}
	w.pause.set(st.Paused, w.cfg.Clock.Now())
	if st.Paused {
		w.cfg.Logger.Info("dynapart: the group is paused: changes left to be delivered again", "group", w.cfg.Group)
	}
	return st.Paused
}

// recordsGroupState is the group's state for HandleRecords: the start's consistent read of the
// group (prepare), while it is younger than a standby poll and the group existed then (the call
// took its slot without standing by, and did not create the group), else a read of its own. So an
// invocation that found its slot at once reads the meta item once, with the group's slots. A call
// that would record Config.MaxWCU or MaxRCU on a group that had no budget reads again, so that a
// budget an operator set meanwhile is not overwritten from an older read.
func (s *slot) recordsGroupState(ctx context.Context) (lock.GroupState, error) {
	w := s.w
	st := s.e.started
	fresh := st.Exists && w.cfg.Clock.Now().Sub(s.e.describedAt) <= w.cfg.StandbyPoll
	records := !st.Budget.Set() && (w.cfg.MaxWCU > 0 || w.cfg.MaxRCU > 0)
	if fresh && !records {
		return st, nil
	}
	return s.e.locks.GroupState(ctx, w.cfg.Group)
}

// reportRecordsUsage adds what HandleRecords consumed to the group's budget at the end of a call
// on a budgeted group (a Lambda function may be frozen after it), and pauses the group when the
// budget is reached, as a slot holder of Run does.
func (s *slot) reportRecordsUsage() {
	w := s.w
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), w.cfg.LeaseWriteTimeout)
	defer cancel()
	st, err := s.e.locks.GroupState(ctx, w.cfg.Group)
	if err != nil {
		w.cfg.Logger.Warn("dynapart: read the group's meta item", "slot", s.lease.Slot(), "err", err)
		return
	}
	s.reportUsage(ctx, st, true)
}
