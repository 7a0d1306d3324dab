package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/scan"
)

// Change is one record of the table's stream as HandleRecords takes it: the item's key and its
// images before and after the write (OldImage nil for a new item), Removed for a delete.
type Change struct {
	Keys, OldImage, NewImage map[string]types.AttributeValue
	Removed                  bool
}

// changesOf is the records of a shard as Changes.
func changesOf(recs []stypes.Record) []Change {
	out := make([]Change, 0, len(recs))
	for _, r := range recs {
		d := r.Dynamodb
		if d == nil {
			out = append(out, Change{Removed: true})
			continue
		}
		out = append(out, Change{Keys: follow.Image(d.Keys), OldImage: follow.Image(d.OldImage),
			NewImage: follow.Image(d.NewImage), Removed: r.EventName == stypes.OperationTypeRemove})
	}
	return out
}

// errNotVersioned is HandleRecords' error for a worker whose ledger records no versions.
var errNotVersioned = configErr("Versions", "HandleRecords needs the ledger to record versions: set Versions (or Follow)")

// HandleRecords resolves changes that the caller read from the table's stream itself (a Lambda
// function a DynamoDB Streams event source mapping invokes: worker/awslambda.StreamHandler) as a
// worker that follows the stream resolves its records (see Config.Follow): it takes a slot of the
// group (standing by while every slot is held, until ctx's deadline minus DeadlineMargin), resolves
// every changed item until its current version is recorded as finished, and releases the slot. It
// returns the indexes of the changes whose items are not resolved (the last change of each such
// item), for the caller to have them delivered again; an error when nothing could be resolved, or
// when DynamoDB refused a request for good (a permission, a table), with the unresolved indexes.
// It records Config.MaxWCU and MaxRCU on a group that has no budget yet. While the group is
// paused (an operator's pause, or its budget reached), as read at the start of the call, it
// handles nothing and returns every index, without taking a slot when the worker's start read it
// so. When the group has a budget (as read at the start), it adds what the call consumed to it
// at the end of the call, after the slot's release, and pauses the group when the budget is
// reached (so does a call that ran a BudgetInterval or longer, for a budget set during it). The
// state read at the start is the one the worker's start reads with the group's slots
// (recordsGroupState), so a call on a group without a budget reads the meta item once.
// Config.Versions is required; the jobs that process the same table (a back-fill) must record
// versions too.
func (w *Worker) HandleRecords(ctx context.Context, h Handler, changes []Change) ([]int, error) {
	all := func() []int {
		out := make([]int, len(changes))
		for i := range out {
			out[i] = i
		}
		return out
	}
	switch {
	case h == nil:
		return all(), &ConfigError{Pkg: "dynapart", Field: "handler", Reason: "required"}
	case !w.cfg.Versions:
		return all(), errNotVersioned
	case !w.running.CompareAndSwap(false, true):
		return all(), ErrRunTwice
	}
	defer w.running.Store(false)
	s, err := w.slotForRecords(ctx, h)
	if s == nil || err != nil {
		return all(), err
	}
	budgeted := true // a call that cannot tell reports its usage
	began := w.cfg.Clock.Now()
	defer func() {
		// After the release: the report needs no slot. A call on a group found without a budget
		// reports too when it ran a BudgetInterval or longer, so that a budget set meanwhile gets
		// its consumption, as a slot holder of Run reports at its next interval (a shorter call's
		// is not counted).
		if budgeted || w.cfg.Clock.Now().Sub(began) >= w.cfg.BudgetInterval {
			s.reportRecordsUsage()
		}
	}()
	defer s.release()
	paused, budgeted, err := s.groupPaused(ctx)
	if paused || err != nil {
		return all(), err
	}
	return s.resolveChanges(changes)
}

// slotForRecords prepares the run and takes a slot of the group for HandleRecords; no slot (nil,
// nil) when the start found the group paused (pausedAtStart).
func (w *Worker) slotForRecords(ctx context.Context, h Handler) (*slot, error) {
	e, err := w.prepare(ctx)
	if err != nil || w.pausedAtStart(ctx, e) {
		return nil, err
	}
	var stopAt time.Time
	if dl, ok := ctx.Deadline(); ok {
		stopAt = dl.Add(-w.cfg.DeadlineMargin)
	}
	lease, err := w.takeSlot(ctx, e, runStandby, stopAt)
	if err == nil && lease == nil {
		err = errors.New("dynapart: every slot of the group is finished (a once-group): give the stream handler a group of its own")
	}
	if err != nil {
		return nil, err
	}
	w.setState(lease.Slot(), lease.Token(), StateWorking)
	return &slot{w: w, e: e, lease: lease, h: h, stopAt: stopAt, ctx: ctx, runCtx: ctx,
		log: w.cfg.Logger.With("slot", lease.Slot(), "token", lease.Token())}, nil
}

// resolveChanges resolves the changes' candidates with the handler pool until all are resolved or
// the slot stops; it returns the indexes of the unresolved ones' last changes, and the refusal
// that stopped it (stopOnRefusal), if one did.
func (s *slot) resolveChanges(changes []Change) ([]int, error) {
	p := s.newPass(slotCheckpoint{}, wholeShare{})
	stop := p.startContexts()
	defer stop()
	cands := p.candidates(changes)
	resolved := make([]atomic.Bool, len(cands))
	_ = p.withHandlers(func() error {
		for i, cd := range cands {
			t := task{item: scan.NewItem(cd.image, func() { resolved[i].Store(true) }), key: cd.key, follow: true}
			select {
			case p.tasks <- t:
			case <-p.fetchCtx.Done():
				return nil
			}
		}
		return nil
	})
	var out []int
	for i, cd := range cands {
		if !resolved[i].Load() {
			out = append(out, cd.last)
		}
	}
	return out, p.refused()
}
