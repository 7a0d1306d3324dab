package work

import (
	"context"
	"fmt"
	"io"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// A --once run of a group whose every slot is finished processes nothing: the worker logs
// "nothing to do" and exits 0 (a finished once-group does not pass again). Its dry run says so
// first, and its counts and estimate are then what a run of a new group (--group) would do: the
// items seeded, redriven or reset since the group finished.

// finishedOnceGroup reports whether a --once run of group would find every slot finished: one
// consistent Query of the group in the lease table (Plan has checked the table exists).
func finishedOnceGroup(ctx context.Context, g *cli.Globals, f *workFlags, group string) (bool, error) {
	if !f.cfg.Once {
		return false, nil
	}
	lc, err := g.LeaseClient(ctx, f.cfg.LeaseTable)
	if err != nil {
		return false, err
	}
	st, err := lc.GroupStatus(ctx, group)
	if err != nil {
		return false, err
	}
	return st.Finished(), nil
}

// printFinished says that the group is finished, what a run would do and what the counts are.
func (d *dryRun) printFinished(out io.Writer) {
	if d.finished == "" {
		return
	}
	fmt.Fprintf(out, "group %q is finished: a --once run of it processes nothing (a finished once-group does not pass again); "+
		"the figures below are what a run of a new group would process: give --group a new name, and --workers "+
		"(e.g. --group %s/redo --workers %d)\n", d.finished, d.f.cfg.Table, d.plan.Slots)
}

// costLabel names what the estimate's total is the cost of.
func (d *dryRun) costLabel() string {
	if d.finished != "" {
		return "estimated cost of a run of a new --group"
	}
	return "estimated cost of the job"
}
