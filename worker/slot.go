package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// slot is one held lease and everything working on it needs, as river's producer holds what a run
// needs: the worker, the run's env, the lease, the handler, the stop time and a logger naming the
// slot, with the plan the lease was taken under and the slot's last checkpoint. Its methods are the
// slot's life: start (plan and checkpoint), passes, finish, steal (steal.go), release. Passes
// (pass.go) embed it.
type slot struct {
	w      *Worker
	e      *env
	lease  *lock.Lease
	h      Handler
	stopAt time.Time    // the deadline margin, zero when none
	log    *slog.Logger // the worker's logger with the slot and the token

	// ctx is Run's context, also cancelled (cause errReplan) when the group is resized. It stops
	// claiming; the writes that record outcomes outlive it (see pass.writeContext).
	ctx context.Context
	// runCtx is Run's context itself, which ctx follows (through a goroutine, for a context type
	// of the caller's own): stopping reads both.
	runCtx context.Context

	plan       scan.Plan       // the group's plan the lease was taken under (set by start)
	cp         slotCheckpoint  // the slot's checkpoint as its last pass left it
	checkpoint checkpointState // whether cp is on the lease yet
	// rescan: the stream lost records (follow.go): passes renew every finished item whose
	// content changed, and the next reader restarts trimmed shards from the stream's oldest record
	// (those whose loss the rescan covers: follow.ReaderConfig.Rescanned is rescanFrom).
	rescan     bool
	rescanFrom time.Time // when the slot met the loss its rescan is for, before its first pass
	lastTrim   time.Time // when the stream last ended following with lost records (follow_trim.go)
	throughAt  time.Time // when keepFollowing last read how far the group has read the stream
}

// slotEnd is how a slot's run ended.
type slotEnd int

const (
	// slotStopped: ctx ended, the deadline margin passed or the lease was lost; Run decides.
	slotStopped slotEnd = iota
	// slotFinished: the slot's share is done and the slot is marked finished (once).
	slotFinished
	// slotReplan: the group was resized; Run takes a slot again under the new plan.
	slotReplan
)

// checkpointState says whether the slot's last checkpoint has been sent to its lease.
type checkpointState int

const (
	// checkpointSent: the pass sent it (a save that failed is repeated by the next one).
	checkpointSent checkpointState = iota
	// checkpointWithFinish: a once-worker's pass ended complete and clean and left its checkpoint
	// to the write that marks the slot finished (slot.finish), which saves both in one round trip.
	checkpointWithFinish
)

// runSlot works on one held lease until the slot's share is finished (once), ctx ends, the
// deadline nears, the lease is lost or the group is resized. It always releases the lease (if
// still held) before it returns.
func (w *Worker) runSlot(ctx context.Context, e *env, lease *lock.Lease, h Handler, stopAt time.Time) (slotEnd, error) {
	s := &slot{w: w, e: e, lease: lease, h: h, stopAt: stopAt, runCtx: ctx,
		log: w.cfg.Logger.With("slot", lease.Slot(), "token", lease.Token())}
	w.setState(lease.Slot(), lease.Token(), StateWorking)
	// A resize stops the slot's work as a shutdown would (see replan.go).
	sctx, replan := context.WithCancelCause(ctx)
	s.ctx = sctx
	defer s.release() // after the watch has stopped; the release outlives sctx
	defer replan(nil)
	stopWatch := s.watchGroup(func() {
		s.log.Info("dynapart: the group was resized: no new claims, saving the checkpoint, taking a slot under the new plan")
		replan(errReplan)
	})
	defer stopWatch()
	finished, err := s.passes()
	if err == nil && finished && w.steals() {
		// Keep the finished slot's lease (it fences what the thief writes) while taking units
		// from slots still working (see steal.go). A one-slot plan's finish released the lease:
		// there is nothing to steal, and steal returns at once.
		s.steal()
	}
	switch {
	case errors.Is(err, errReplan):
		return slotReplan, nil
	case err != nil:
		return slotStopped, err
	case ctx.Err() == nil && errors.Is(context.Cause(sctx), errReplan):
		return slotReplan, nil
	case finished:
		return slotFinished, nil
	}
	return slotStopped, nil
}

// start reads the lease's plan and the checkpoint the slot resumes from: its own, or, when the
// lease is of a newer plan than that checkpoint, one composed from the group's once the old plan
// has stopped (see replan.go). A read that fails is retried by taking a slot again (errReplan)
// after a pause.
func (s *slot) start() error {
	cp, derr := decodeSlotCheckpoint(s.lease.Checkpoint())
	if derr != nil {
		s.log.Warn("dynapart: ignoring the slot's checkpoint, rescanning the share", "err", derr)
		cp = slotCheckpoint{}
	}
	var err error
	s.plan, err = s.leasePlan()
	if errors.Is(err, errReplan) {
		s.log.Info("dynapart: the group was resized since the slot was taken: taking a slot under the new plan")
	}
	if err == nil && cp.epoch < s.lease.Epoch() {
		if err = s.waitOldPlan(); err == nil {
			if cp, err = s.adoptPlan(cp); err == nil {
				err = s.saveCheckpoint(cp.encode())
			}
		}
		if err == nil {
			s.log.Info("dynapart: slot taken under the group's new plan", "epoch", cp.epoch, "slots", cp.n, "pass", cp.pass)
		}
	}
	if err == nil && cp.run == 0 && s.w.marksUnits(s.plan) {
		// The pass's unit markers are named by the token that started it (see steal.go): saved
		// at once, so that thieves and the slot's next holder use the same markers.
		cp.epoch, cp.n, cp.run = s.lease.Epoch(), s.plan.Slots, s.lease.Token()
		err = s.saveCheckpoint(cp.encode())
	}
	if err != nil && !errors.Is(err, errReplan) && !s.stopped() {
		s.log.Warn("dynapart: reading the group's plan failed; taking a slot again", "err", err)
		s.wait(failedPassBackoff)
		err = errReplan
	}
	cp.epoch, cp.n = s.lease.Epoch(), s.plan.Slots
	if cp.scan == rescanMark {
		// The previous holder was rescanning the table for records the stream lost: start the
		// rescan again (its position is not kept), covering every change made before now.
		s.log.Warn("dynapart: the slot's previous holder was rescanning the whole table for records the stream may have lost: rescanning it again from its start")
		cp.scan, cp.counts.since = "", time.Time{} // the rescan begins again: judged from its new start
		s.rescan, s.rescanFrom = s.w.cfg.Follow, s.w.cfg.Clock.Now()
	}
	s.cp = cp
	return err
}

// passes is the slot's loop of passes; finished reports that the slot's share is done and the
// slot marked finished (once).
func (s *slot) passes() (finished bool, err error) {
	c := s.w.cfg
	if err := s.start(); err != nil {
		if s.stopped() {
			return false, nil
		}
		return false, err
	}
	if !s.judgeDowntime() {
		return false, nil // the lease lost, or DynamoDB out of reach: Run decides
	}
	var out outage
	for {
		// Paused: no pass starts (a pass in progress stops claiming, see pauseState).
		if !s.waitResumed() {
			return false, nil
		}
		if s.follows() {
			if err := s.followStream(&out); err != nil {
				return false, err
			}
			if s.stopped() || s.pastStop() {
				return false, nil
			}
			continue
		}
		res, err := s.runPass(s.cp)
		s.cp, s.checkpoint = res.cp, res.checkpoint
		stopped := s.stopped() || s.pastStop()
		if stopped || err != nil {
			// A checkpoint left to the write that marks the slot finished, which does not come
			// now, is saved on its own.
			s.sendCheckpoint()
		}
		switch {
		case stopped:
			return false, nil // Run decides what to return
		case err != nil:
			if retry, err := s.failedPass(&out, err, true); !retry {
				return false, err
			}
			continue
		}
		out.passSucceeded()
		s.w.stats.passes.Add(1)
		s.log.Info("dynapart: pass complete", "pass", s.cp.pass, "again", s.cp.dirty)
		if c.Follow && !s.cp.dirty {
			if !s.afterCleanPass() {
				return false, nil
			}
			continue
		}
		if c.Once && !s.cp.dirty {
			return s.finishWhenResumed()
		}
		wait := s.w.onceWait(res.nextDue)
		finished, ended, wait, err := s.passesByKey(res.left, wait)
		if ended {
			return finished, err
		}
		s.cp = s.nextPass()
		if err := s.saveCheckpoint(s.cp.encode()); err != nil {
			return false, nil
		}
		if !s.wait(wait) {
			return false, nil
		}
	}
}

// onceWait is the wait before the next pass: PollInterval, or in once mode when the earliest item
// a pass left is due (nextDue) when that is sooner: the job's end waits for it.
func (w *Worker) onceWait(nextDue time.Duration) time.Duration {
	if w.cfg.Once && nextDue > 0 && nextDue < w.cfg.PollInterval {
		return nextDue
	}
	return w.cfg.PollInterval
}

// failedPass handles a pass (resumes: the next pass resumes it) or a follow that failed with err:
// it reports whether to retry from the last checkpoint (after a backoff), or else the error Run
// returns (nil when stopped meanwhile). A configuration error, or failures lasting OutageTimeout
// (see outage), end the slot.
func (s *slot) failedPass(out *outage, err error, resumes bool) (retry bool, _ error) {
	c := s.w.cfg
	var ce *ConfigError
	if errors.As(err, &ce) {
		return false, err
	}
	if out.failed(c.Clock.Now(), c.OutageTimeout, err, resumes) {
		return false, fmt.Errorf("dynapart: slot %d: giving up after %d failed passes in %s (OutageTimeout): %w",
			s.lease.Slot(), out.failures, c.OutageTimeout, err)
	}
	s.log.Error("dynapart: pass failed, retrying from the last checkpoint", "err", err, "failures", out.failures)
	return s.wait(backoff(failedPassBackoff, maxFailedPassBackoff, out.failures)), nil
}

// The backoff between failed passes of one slot holder (until OutageTimeout gives up).
const (
	failedPassBackoff    = time.Second
	maxFailedPassBackoff = 30 * time.Second
)

// stopped reports whether the slot stops: ctx ended (shutdown or resize) or the lease ended.
func (s *slot) stopped() bool { return s.ctx.Err() != nil || s.lease.Context().Err() != nil }

// pastStop reports whether the deadline margin has passed.
func (s *slot) pastStop() bool {
	return !s.stopAt.IsZero() && !s.w.cfg.Clock.Now().Before(s.stopAt)
}

// sendCheckpoint saves the slot's checkpoint on its own when the last pass left it to the write
// that marks the slot finished.
func (s *slot) sendCheckpoint() {
	if s.checkpoint == checkpointWithFinish {
		_ = s.saveCheckpoint(s.cp.encode())
		s.checkpoint = checkpointSent
	}
}

// release releases the lease when it is still held, and reports a lost one.
func (s *slot) release() {
	cctx, cancel := s.w.leaseWriteContext(s.ctx)
	defer cancel()
	if err := s.lease.Release(cctx); err != nil {
		if errors.Is(err, lock.ErrLeaseLost) {
			s.w.stats.leasesLost.Add(1)
			s.w.leaseEvent(LeaseLost, s.lease)
			s.log.Warn("dynapart: lease lost", "cause", context.Cause(s.lease.Context()))
			return
		}
		s.log.Error("dynapart: release lease", "err", err)
		return
	}
	s.w.leaseEvent(LeaseReleased, s.lease)
}

// finishWhenResumed marks the slot finished with its last checkpoint once the group is not paused
// (a paused once-worker does not mark its slot finished until resumed). A checkpoint left to that
// write is saved on its own before a pause is waited out, so a stop or crash during the pause
// keeps it.
func (s *slot) finishWhenResumed() (finished bool, err error) {
	if s.w.pause.flagged() {
		s.sendCheckpoint()
		if !s.waitResumed() {
			return false, nil
		}
	}
	return s.finish()
}

// finish marks the slot finished and saves its last checkpoint in the same write, which also
// releases the lease when nothing follows on it (a one-slot plan, or no stealing: see
// releasesOnFinish); a lost lease is a stop. When both the write and its resend fail, the
// checkpoint is the pass's last periodic one: the slot's next holder reads the share's tail again
// (its items are done, so only reads are repeated).
func (s *slot) finish() (finished bool, err error) {
	if err := s.finishWrite(); err != nil {
		if errors.Is(err, lock.ErrLeaseLost) {
			return false, nil
		}
		if !s.releasesOnFinish() {
			_ = s.saveCheckpoint(s.cp.encode()) // the next holder resumes at the pass's end
		}
		return false, fmt.Errorf("dynapart: mark slot %d finished: %w", s.lease.Slot(), err)
	}
	s.w.leaseEvent(LeaseFinished, s.lease)
	s.log.Info("dynapart: slot finished")
	return true, nil
}

// releasesOnFinish reports whether the write that marks the slot finished releases its lease too:
// nothing follows on it, as the worker does not steal from the plan's other slots.
func (s *slot) releasesOnFinish() bool { return !s.w.stealsIn(s.plan) }

// finishWrite sends finish's write. A FinishAndRelease that fails in transit (it may have landed
// with its answer lost) is sent once more by Release, which repeats the same write.
func (s *slot) finishWrite() error {
	cctx, cancel := s.w.leaseWriteContext(s.ctx)
	defer cancel()
	if !s.releasesOnFinish() {
		return s.lease.FinishWithCheckpoint(cctx, s.cp.encode())
	}
	err := s.lease.FinishAndRelease(cctx, s.cp.encode())
	if err == nil || errors.Is(err, lock.ErrLeaseLost) {
		return err
	}
	rctx, rcancel := s.w.leaseWriteContext(s.ctx)
	defer rcancel()
	if s.lease.Release(rctx) == nil {
		return nil
	}
	return err
}

// wait pauses for d by the worker's clock; false when ctx ends, the lease is lost or stopAt passes.
func (s *slot) wait(d time.Duration) bool {
	// Reaching stopAt first ends the wait too, but as a stop (false).
	cutShort := false
	if !s.stopAt.IsZero() {
		if left := s.stopAt.Sub(s.w.cfg.Clock.Now()); left < d {
			if left <= 0 {
				return false
			}
			d, cutShort = left, true
		}
	}
	select {
	case <-s.ctx.Done():
		return false
	case <-s.lease.Done():
		return false
	case <-s.w.cfg.Clock.After(d):
		return !cutShort
	}
}

// saveCheckpoint saves the slot's checkpoint v; a failure other than a lost lease is logged.
func (s *slot) saveCheckpoint(v string) error {
	cctx, cancel := s.w.leaseWriteContext(s.ctx)
	defer cancel()
	err := s.lease.SaveCheckpoint(cctx, v)
	if err != nil && !errors.Is(err, lock.ErrLeaseLost) {
		s.w.cfg.Logger.Warn("dynapart: save checkpoint", "slot", s.lease.Slot(), "err", err)
	}
	return err
}
