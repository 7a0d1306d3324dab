package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// defaultSubSegments is what a group whose meta item lacks sub_segments used (the worker's default).
const defaultSubSegments = 4

// newScaleCmd changes a group's slot count (lock.ResizeGroup).
func newScaleCmd(g *globals) *cobra.Command {
	var group, leaseTable string
	var workers int
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Change a group's slot count N, running or idle",
		Long: `Sets the group's slot count to M (--workers) and starts a new plan: one conditional write of the
group's meta item in the lease table (n = M, plan epoch + 1). Nothing else is written.

Every worker of the group reads the meta item once per heartbeat (--heartbeat, default
lease-ttl/3), so within one heartbeat the running workers stop claiming at the next page boundary,
save their positions, release their slots and take a slot again under the new N. Workers beyond
the new N become standbys; the new slots are taken by standbys or by new workers ('dynapart work'
without --workers joins at the group's current N). Slots finished under the old plan are open
again; a once-job ends when every slot of the new plan is finished.

What a resize costs:
  segment mode  nothing is read again. The group's parallel-scan segments are fixed when it is
                created; slot k of N owns a contiguous block of them, and every segment's cursor
                moves to its new owner. N can grow up to the segment count.
  index mode    nothing is read again: slot k owns the shards s with s mod N = k, and each
                shard's cursor moves to its new owner. N can grow up to the shard count.
  filter mode   each slot rescans its new share (the items whose key maps to it under the new N)
                from the start: items already done are skipped without a handler call, so the
                extra cost is reads only, up to one more pass over the table.

Scaling to the current N is a no-op (exit 0, "no change"). A group that does not exist (no meta
item: never run, or a typo), M < 1, or M beyond what the group's segments (or shards) allow exits
2 and nothing is written.`,
		Example: `  dynapart scale --group users/default --workers 6
  dynapart scale --group users/default --workers 2 --lease-table dynapart-leases`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("workers") {
				return usagef("--workers is required: the group's new slot count")
			}
			return runScale(cmd, g, group, leaseTable, workers)
		},
	}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "lease group (required; work's default is TABLE/JOB)")
	f.IntVar(&workers, "workers", 0, "the group's new slot count M (required, at least 1)")
	f.StringVar(&leaseTable, "lease-table", worker.DefaultLeaseTable, "lease table")
	return cmd
}

func runScale(cmd *cobra.Command, g *globals, group, leaseTable string, m int) error {
	switch {
	case group == "":
		return usagef("--group is required (the work command's --group, default TABLE/JOB)")
	case m < 1:
		return usagef("--workers %d: a group needs at least 1 slot (nothing written)", m)
	}
	ctx := cmd.Context()
	db, err := g.dynamoClient(ctx)
	if err != nil {
		return err
	}
	if err := lock.CheckTable(ctx, db, leaseTable); err != nil {
		return err
	}
	lc, err := lock.New(db, leaseTable)
	if err != nil {
		return err
	}
	st, err := lc.GroupState(ctx, group)
	if err != nil {
		return err
	}
	if !st.Exists {
		return usagef("group %q does not exist in %q (nothing written): %v", group, leaseTable, lock.ErrGroupNotFound)
	}
	if err := checkScaleLimit(group, st, m); err != nil {
		return err
	}
	res, err := lc.ResizeGroup(ctx, group, m, lock.WithResizeMeta(pinSegments))
	if errors.Is(err, lock.ErrGroupNotFound) {
		return usagef("group %q does not exist in %q (nothing written): %v", group, leaseTable, err)
	}
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if !res.Changed {
		fmt.Fprintf(out, "group %s: already %d slots (no change)\n", group, res.NewN)
		return nil
	}
	fmt.Fprintf(out, "group %s: %d -> %d slots (plan epoch %d); running workers re-plan within one heartbeat\n",
		group, res.OldN, res.NewN, res.Epoch)
	return nil
}

// scaleLimit is the most slots a group can have, and what fixes it ("segments" or "shards"); 0 when
// nothing limits it (filter mode, or a group not made by a worker).
func scaleLimit(st lock.GroupState) (limit int, unit string) {
	switch scan.Mode(st.Meta["mode"]) {
	case scan.ModeSegment:
		return segmentCount(st), "segments"
	case scan.ModeIndex:
		shards, _ := strconv.Atoi(st.Meta["shards"])
		return shards, "shards"
	}
	return 0, ""
}

// segmentCount is a segment-mode group's number of parallel-scan segments: the meta item's
// "segments", or for a group made before it was recorded n x sub_segments (default 4).
func segmentCount(st lock.GroupState) int {
	if v, err := strconv.Atoi(st.Meta["segments"]); err == nil && v > 0 {
		return v
	}
	sub, err := strconv.Atoi(st.Meta["sub_segments"])
	if err != nil || sub < 1 {
		sub = defaultSubSegments
	}
	return st.N * sub
}

// checkScaleLimit refuses m beyond the group's segments (segment mode) or shards (index mode).
func checkScaleLimit(group string, st lock.GroupState, m int) error {
	limit, unit := scaleLimit(st)
	if limit > 0 && m > limit {
		return usagef("group %q can be scaled up to %d slots, not %d: it has %d %s, and that count is fixed when the group is created (nothing written)",
			group, limit, m, limit, unit)
	}
	return nil
}

// pinSegments records the segment count of a segment-mode group made before it was recorded
// (n x sub_segments), in the resize's own write: after n changes it can no longer be derived.
func pinSegments(st lock.GroupState) map[string]string {
	if scan.Mode(st.Meta["mode"]) != scan.ModeSegment || st.Epoch != 0 {
		return nil
	}
	return map[string]string{"segments": strconv.Itoa(segmentCount(st))}
}
