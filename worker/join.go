package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// joinGroup settles, from the group's meta item as read before the first acquisition, what the Config
// leaves to the group: with Workers 0 the worker joins at the group's n (which must exist), with
// Segments 0 it takes the group's segment count (a group recorded before segment counts used
// n x SubSegments; a new group gets scan.DefaultTotal). A Workers that disagrees with an existing
// group is a *lock.GroupMismatchError on "n": resizing is ResizeGroup's job, never a typo's.
func (w *Worker) joinGroup(e *env, st lock.GroupState) error {
	c := w.cfg
	switch {
	case !st.Exists && c.Workers == 0:
		return &ConfigError{Pkg: "dynapart", Field: "Workers", Reason: fmt.Sprintf("group %q does not exist in %q yet: the first workers of a group set its size (Workers)", c.Group, c.LeaseTable)}
	case st.Exists && c.Workers != 0 && c.Workers != st.N:
		return &lock.GroupMismatchError{Group: c.Group, Field: "n", Have: strconv.Itoa(st.N), Want: strconv.Itoa(c.Workers)}
	}
	e.joined = st.Exists
	n := c.Workers
	if st.Exists {
		n = st.N
	}
	e.n = n
	e.total = c.Segments
	e.metaDefaults = groupMetaDefaults()
	if c.Mode != scan.ModeIndex {
		// A group recorded before segment counts were has n x SubSegments segments.
		e.metaDefaults["segments"] = strconv.Itoa(max(st.N, 1) * c.SubSegments)
		if e.total == 0 {
			e.total = w.groupSegments(st, n)
		}
	}
	e.meta = groupMeta(c, e.total)
	return nil
}

// resizedSinceCreated reports whether err, from an acquisition with n = Workers by a worker that
// found no group when it started, is a disagreement on n with a group that has been resized since
// it was created (its plan epoch is past 0): the worker then joins the group at its current n,
// like a worker started after the resize. A group still at its first plan was created with another
// n, which is refused as in joinGroup.
func (w *Worker) resizedSinceCreated(ctx context.Context, e *env, err error) bool {
	var gm *lock.GroupMismatchError
	if !errors.As(err, &gm) || gm.Field != "n" {
		return false
	}
	st, serr := e.locks.GroupState(ctx, w.cfg.Group)
	if serr != nil || !st.Exists || st.Epoch == 0 {
		return false
	}
	w.cfg.Logger.Info("dynapart: the group was created and resized since this worker started; joining it at its current n",
		"group", w.cfg.Group, "workers", w.cfg.Workers, "n", st.N, "epoch", st.Epoch)
	return true
}

// groupSegments is the segment count of a group that Config.Segments leaves open: the group's
// own, or the default for a new group of n slots.
func (w *Worker) groupSegments(st lock.GroupState, n int) int {
	if !st.Exists {
		return scan.DefaultTotal(n, w.cfg.SubSegments)
	}
	if v, err := strconv.Atoi(st.Meta["segments"]); err == nil && v > 0 {
		return v
	}
	return st.N * w.cfg.SubSegments // recorded before segment counts: this worker's sub-segments
}

// Plan returns the scan plan a Run would start with now: the group's n (Workers for a group that
// does not exist yet) and segment count. It reads the group's meta item; a Workers or a group
// setting (Mode, Once, the ledger, ...) that disagrees with the group, or Workers 0 for a group
// that does not exist, is an error as in Run.
func (w *Worker) Plan(ctx context.Context) (scan.Plan, error) {
	c := w.cfg
	if err := lock.CheckTable(ctx, describeOnly{c.Client}, c.LeaseTable); err != nil {
		var te *lock.TableError
		if !errors.As(err, &te) {
			return scan.Plan{}, err
		}
		if c.Workers == 0 {
			return scan.Plan{}, &ConfigError{Pkg: "dynapart", Field: "Workers", Reason: fmt.Sprintf("group %q does not exist yet (%v): the first workers of a group set its size (Workers)", c.Group, te), Err: err}
		}
		return scan.Plan{}, &ConfigError{Pkg: "dynapart", Field: "LeaseTable", Reason: te.Error() + " (create it with `dynapart init` or lock.CreateTable)", Err: err}
	}
	locks, err := w.lockClient()
	if err != nil {
		return scan.Plan{}, err
	}
	st, err := locks.GroupState(ctx, c.Group)
	if err != nil {
		return scan.Plan{}, err
	}
	e := &env{locks: locks}
	if err := w.joinGroup(e, st); err != nil {
		return scan.Plan{}, err
	}
	if err := st.CheckMeta(c.Group, e.meta, e.metaDefaults); err != nil {
		return scan.Plan{}, err // a Run would be refused at its first acquisition
	}
	return w.scanPlan(e, e.n), nil
}
