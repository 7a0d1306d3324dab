package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dynapart/dynapart/lock"
)

// pauseState is the group's pause flag as the slot holder last read it, and the claim writes in
// flight. While the flag is set nothing new is claimed: a claim (or, in complete-only mode, the
// start of a handler) enters through enter, which waits until the group is resumed. The worker
// reports itself paused (Stats.Paused) once the flag is set and no claim write it started is
// still in flight, so from then on it makes no claim until the group is resumed.
type pauseState struct {
	mu       sync.Mutex
	paused   bool
	resumed  chan struct{} // closed while not paused
	inflight int           // claim writes entered and not left
	waiting  int           // enter calls waiting for the resume
	since    time.Time     // when the current pause was seen, by the worker's clock
	total    time.Duration // paused time seen before since
	// reads numbers the reads of the group's meta item in the order they are sent; applied is the
	// newest applied, so that a slow read never overwrites what a later one found (see setRead).
	reads, applied uint64
}

func newPauseState() *pauseState {
	p := &pauseState{resumed: make(chan struct{})}
	close(p.resumed)
	return p
}

// nextRead numbers a read of the group's meta item about to be sent.
func (p *pauseState) nextRead() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	return p.reads
}

// setRead records the flag found by read number read (see nextRead) at now, unless a read sent
// after it has been applied already; it reports whether the flag changed.
func (p *pauseState) setRead(read uint64, paused bool, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if read < p.applied {
		return false
	}
	p.applied = read
	return p.setLocked(paused, now)
}

// set records the flag as read at now; it reports whether it changed.
func (p *pauseState) set(paused bool, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.setLocked(paused, now)
}

func (p *pauseState) setLocked(paused bool, now time.Time) bool {
	if paused == p.paused {
		return false
	}
	p.paused = paused
	if paused {
		p.resumed = make(chan struct{})
		p.since = now
	} else {
		close(p.resumed)
		p.total += now.Sub(p.since)
	}
	return true
}

// enter waits until the group is not paused and counts a claim write in flight; leave ends it.
// It returns ctx's error when ctx ends first.
func (p *pauseState) enter(ctx context.Context) error {
	for {
		p.mu.Lock()
		if !p.paused {
			p.inflight++
			p.mu.Unlock()
			return nil
		}
		ch := p.resumed
		p.waiting++
		p.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// waiters is the number of enter calls waiting for the resume.
func (p *pauseState) waiters() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

func (p *pauseState) leave() {
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
}

// wait returns nil at once when the group is not paused, else when it is resumed; ctx's error when
// ctx ends first.
func (p *pauseState) wait(ctx context.Context) error {
	if err := p.enter(ctx); err != nil {
		return err
	}
	p.leave()
	return nil
}

// flagged reports the flag as last read (claims may still be in flight).
func (p *pauseState) flagged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// settled reports a pause in effect: the flag is set and no claim write is in flight.
func (p *pauseState) settled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.inflight == 0
}

// pausedTime is the time spent paused up to now (by the worker's clock), for the rates.
func (p *pauseState) pausedTime(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return p.total + now.Sub(p.since)
	}
	return p.total
}

// watchGroup reads the group's meta item once per heartbeat (or per BudgetInterval, when the group
// has a budget and that is shorter: groupReadEvery) while the lease is held, so a holder
// learns of a pause, a resume or a resize within about one heartbeat at the cost of one eventually
// consistent GetItem per heartbeat (lock.PeekGroup, half a read unit), whatever the group's size;
// what a peek shows changed is read again consistently (lock.GroupState) before it is acted on. Its first read is a heartbeat
// after the slot's start: the slot starts with the group's state after its take (leasePlan: a
// read it applied, or the meta item the acquisition of a new group wrote, which is not paused),
// one round trip fewer before the first item. replan is called (at
// most once) when the group's plan epoch differs from the lease's: the group was resized. stop
// ends the watch, waits for it, and clears the pause flag (a worker without a slot has nothing to
// pause).
func (s *slot) watchGroup(replan func()) (stop func()) {
	w, lease := s.w, s.lease
	var once sync.Once
	read := func() {
		if s.readGroup() {
			once.Do(replan)
		}
	}
	done := make(chan struct{})
	exited := goDone(func() {
		for {
			select {
			case <-done:
				return
			case <-lease.Done():
				return
			case <-w.cfg.Clock.After(w.groupReadEvery()):
			}
			read()
		}
	})
	return func() {
		close(done)
		<-exited
		w.pause.set(false, w.cfg.Clock.Now())
	}
}

// readGroup reads the meta item once and applies the pause flag; it reports whether the plan
// epoch moved past the lease's. A failed read keeps the last value (logged). A slow read is given
// LeaseWriteTimeout rather than cut at one heartbeat, so an overloaded table still answers.
func (s *slot) readGroup() (resized bool) {
	w, lease := s.w, s.lease
	ctx, cancel := context.WithTimeout(lease.Context(), w.cfg.LeaseWriteTimeout)
	defer cancel()
	read := w.pause.nextRead()
	st, err := s.e.locks.PeekGroup(ctx, w.cfg.Group)
	if err == nil && s.groupMoved(st) {
		st, err = s.e.locks.GroupState(ctx, w.cfg.Group) // confirmed before it is acted on
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) || lease.Context().Err() == nil {
			w.cfg.Logger.Warn("dynapart: read the group's meta item", "slot", lease.Slot(), "err", err)
		}
		return false
	}
	resized = s.applyGroup(read, st)
	s.reportUsage(ctx, st, false)
	return resized
}

// groupMoved reports whether a peek at the group's meta item shows something the holder would act
// on: a pause flag other than its own, a plan epoch other than the lease's, a budget reached. A
// peek may be stale (lock.PeekGroup), so what it shows is read again consistently first.
func (s *slot) groupMoved(st lock.GroupState) bool {
	return st.Paused != s.w.pause.flagged() || (st.Exists && st.Epoch != s.lease.Epoch()) ||
		(st.Budget.Reached() && !st.Paused)
}

// applyGroup applies read number read (see pauseState.nextRead) of the group's meta item to the
// slot's holder: the pause flag (logged when it changes), unless a later read was applied first.
// It reports whether the plan epoch moved past the lease's.
func (s *slot) applyGroup(read uint64, st lock.GroupState) (resized bool) {
	w, lease := s.w, s.lease
	if w.pause.setRead(read, st.Paused, w.cfg.Clock.Now()) {
		if st.Paused {
			w.cfg.Logger.Info("dynapart: group paused: no new claims, items in flight finish, the slot is kept", "slot", lease.Slot(),
				"reason", st.PausedReason)
		} else {
			w.cfg.Logger.Info("dynapart: group resumed: claiming again from the checkpoint", "slot", lease.Slot())
		}
	}
	return st.Exists && st.Epoch != lease.Epoch()
}

// waitResumed blocks while the group is paused; false when the slot's ctx ends, the lease is lost
// or stopAt passes first.
func (s *slot) waitResumed() bool {
	w := s.w
	if !w.pause.flagged() {
		return true
	}
	wctx, cancel := w.untilStop(s.lease.Context(), s.stopAt)
	defer cancel()
	stopOnCtx := context.AfterFunc(s.ctx, cancel)
	defer stopOnCtx()
	return w.pause.wait(wctx) == nil
}

// enterUnlessStopped enters a claim write (see pauseState.enter), waiting while the group is
// paused; false when the pass stops claiming (shutdown, lease loss, deadline) before or during
// the wait: a stop makes no new claims, and starts no complete-only handler, for the items still
// queued (they are left unacknowledged for the next holder). A true return must be followed by
// pause.leave.
func (p *pass) enterUnlessStopped() bool {
	return p.fetchCtx.Err() == nil && p.w.pause.enter(p.fetchCtx) == nil
}

// holdWhilePaused gives back the batch claim of a task whose handler has not started (the item
// is claimed again, alone, after the resume) and returns the task without it.
func (p *pass) holdWhilePaused(t task) task {
	if t.claim != nil {
		p.releaseUnsent([]task{t})
		p.gate.give(1)
		t.claim = nil
	}
	return t
}

// processAll processes the tasks held during a pause; it returns the empty list.
func (p *pass) processAll(ts []task) []task {
	for _, t := range ts {
		p.process(t)
	}
	return ts[:0]
}

// resumedChan is closed while the group is not paused.
func (p *pauseState) resumedChan() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resumed
}
