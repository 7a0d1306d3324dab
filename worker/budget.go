package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dynapart/dynapart/lock"
)

// budgetState is the worker's side of the group's capacity budget (Config.MaxWCU, MaxRCU; see
// lock.SetBudget): whether it recorded its budget, whether the group had one when last read, and
// how much of its consumption (Stats.WCU, Stats.RCU) it has reported, and when.
type budgetState struct {
	mu       sync.Mutex
	recorded bool      // Config's budget is on the group
	set      bool      // the group had a budget at the last read of its meta item
	wcu, rcu float64   // consumption reported so far
	last     time.Time // of the last report
}

// recordBudget records Config.MaxWCU and MaxRCU on the group, once per Run: when Run starts if
// the group exists, else when the worker first holds a slot (the group exists then). A budget
// below the group's consumption is refused: Run returns the *lock.BudgetBelowUsageError, having
// taken no slot when the group existed at the start.
func (w *Worker) recordBudget(ctx context.Context, e *env) error {
	c := w.cfg
	b := &w.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.recorded || c.MaxWCU == 0 && c.MaxRCU == 0 {
		return nil
	}
	got, err := e.locks.SetBudget(ctx, c.Group, lock.Limits{WCU: c.MaxWCU, RCU: c.MaxRCU})
	if errors.Is(err, lock.ErrGroupNotFound) {
		return nil // a new group: recorded once the worker holds its first slot
	}
	if err != nil {
		return err
	}
	b.recorded, b.set = true, true
	c.Logger.Info("dynapart: budget recorded on the group", "group", c.Group, "max_wcu", got.MaxWCU, "max_rcu", got.MaxRCU,
		"used_wcu", got.UsedWCU, "used_rcu", got.UsedRCU)
	return nil
}

// usageDue returns the consumption to report now, counting it as reported: when the group has a
// budget (set: as just read, or at an earlier read) and BudgetInterval has passed since the last
// report, or at once with force.
func (w *Worker) usageDue(set bool, force bool) (dw, dr float64, ok bool) {
	b := &w.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	if set {
		b.set = true
	}
	now := w.cfg.Clock.Now()
	if !b.set || !force && now.Sub(b.last) < w.cfg.BudgetInterval {
		return 0, 0, false
	}
	st := w.Stats()
	dw, dr = max(0, st.WCU-b.wcu), max(0, st.RCU-b.rcu)
	if dw == 0 && dr == 0 {
		return 0, 0, false
	}
	b.wcu, b.rcu, b.last = b.wcu+dw, b.rcu+dr, now
	return dw, dr, true
}

// unreport puts back consumption whose report failed, so the next report carries it.
func (w *Worker) unreport(dw, dr float64) {
	b := &w.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wcu, b.rcu = b.wcu-dw, b.rcu-dr
}

// reportUsage adds the worker's consumption since its last report to the group's, when the group
// has a budget (st: the meta item as just read) and a report is due (BudgetInterval has passed, or
// force); the holder that finds the budget reached pauses the group, and stops claiming at once.
func (s *slot) reportUsage(ctx context.Context, st lock.GroupState, force bool) {
	w := s.w
	budget := st.Budget
	if dw, dr, ok := w.usageDue(st.Budget.Set(), force); ok {
		got, err := s.e.locks.AddUsage(ctx, w.cfg.Group, dw, dr)
		if err != nil {
			w.unreport(dw, dr)
			w.cfg.Logger.Warn("dynapart: report consumption to the group's budget", "slot", s.lease.Slot(), "err", err)
			return
		}
		budget = got
	}
	if !budget.Reached() || st.Paused {
		return
	}
	paused, err := s.e.locks.PauseForBudget(ctx, w.cfg.Group)
	if err != nil {
		w.cfg.Logger.Warn("dynapart: pause the group at its budget", "slot", s.lease.Slot(), "err", err)
		return
	}
	if paused { // else paused already, or the budget was raised: the next read tells
		w.cfg.Logger.Warn("dynapart: the group reached its budget: paused (raise it with resume --max-wcu/--max-rcu)",
			"group", w.cfg.Group, "used_wcu", budget.UsedWCU, "max_wcu", budget.MaxWCU, "used_rcu", budget.UsedRCU, "max_rcu", budget.MaxRCU)
		w.pause.set(true, w.cfg.Clock.Now())
	}
}

// flushUsage reports what is left of the worker's consumption when Run ends (best effort,
// bounded), so the group's figures include all of it, also when the worker saw the budget only in
// the start's read of the group (env.started): it joined a group whose budget another worker had
// recorded, and ended before its first read of the group as a holder. Such a short --once worker's
// consumption was never counted (helper-76: 1,498 of the group's 3,000 WCU missing from its
// budget). A budget recorded after the start, in a run shorter than a heartbeat, still goes
// unreported by that worker.
func (w *Worker) flushUsage(e *env) {
	if e == nil || e.locks == nil {
		return
	}
	dw, dr, ok := w.usageDue(e.started.Budget.Set(), true)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.LeaseWriteTimeout)
	defer cancel()
	if _, err := e.locks.AddUsage(ctx, w.cfg.Group, dw, dr); err != nil {
		w.cfg.Logger.Warn("dynapart: report the last consumption to the group's budget", "err", err)
	}
}

// budgetFound records that a read of the group found a budget on it (set).
func (w *Worker) budgetFound(set bool) {
	b := &w.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	b.set = b.set || set
}

// budgetSeen reports whether the worker has seen a budget on the group (recorded it, or read it).
func (w *Worker) budgetSeen() bool {
	b := &w.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.set
}

// groupReadEvery is how often a slot holder reads the group's meta item (watchGroup): every
// Heartbeat, or every BudgetInterval (at least minGroupRead) when the group has a budget and that
// is shorter, since the consumption reports ride on those reads (with a 1s interval under a 3.3s
// heartbeat a budget of 100 WCU was first checked at 2,142 WCU: helper-76).
func (w *Worker) groupReadEvery() time.Duration {
	if bi := w.cfg.BudgetInterval; bi < w.cfg.Heartbeat && w.budgetSeen() {
		return max(bi, minGroupRead)
	}
	return w.cfg.Heartbeat
}

// minGroupRead is the shortest time between a holder's reads of the group: a BudgetInterval of
// 0 or 1ms made them a stream (helper-80: about 150 reads a second per holder).
const minGroupRead = 250 * time.Millisecond

// releaseRefused gives back a slot the worker took but will not work on (its budget was refused),
// so that no other worker waits for its lease to expire.
func (w *Worker) releaseRefused(lease *lock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.LeaseWriteTimeout)
	defer cancel()
	if err := lease.Release(ctx); err != nil {
		w.cfg.Logger.Warn("dynapart: release the slot", "slot", lease.Slot(), "err", err)
	}
}
