// Package scale is `dynapart scale`: a running group's slot count.
package scale

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// New changes a group's slot count (lock.ResizeGroup).
func New(g *cli.Globals) *cobra.Command {
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
again; a once-job ends when every slot of the new plan is finished. Scaling a finished group
opens it again (status: finished=false; scale says so): the next 'work --once' of it finishes
the new plan's slots handling no item already done (segment and index mode read nothing again,
filter mode reads each new share once more), and continuous workers go on as before.

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
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("workers") {
				return cli.Usagef("--workers is required: the group's new slot count")
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

func runScale(cmd *cobra.Command, g *cli.Globals, group, leaseTable string, m int) error {
	switch {
	case group == "":
		return cli.Usagef("--group is required (the work command's --group, default TABLE/JOB)")
	case m < 1:
		return cli.Usagef("--workers %d: a group needs at least 1 slot (nothing written)", m)
	}
	ctx := cmd.Context()
	lc, err := g.LeaseClient(ctx, leaseTable)
	if err != nil {
		return err
	}
	before, err := lc.GroupStatus(ctx, group) // for the message only: whether the scale reopens it
	if err != nil {
		return err
	}
	res, err := worker.Resize(ctx, lc, group, m)
	var ce *worker.ConfigError
	switch {
	case errors.Is(err, lock.ErrGroupNotFound):
		return cli.GroupNotFound(group, leaseTable)
	case errors.As(err, &ce):
		return cli.Usagef("--workers %d: %s (nothing written)", m, ce.Reason)
	case err != nil:
		return err
	}
	out := cmd.OutOrStdout()
	if !res.Changed {
		fmt.Fprintf(out, "group %s: already %s (no change)\n", group, cli.Count(res.NewN, "slot"))
		return nil
	}
	fmt.Fprintf(out, "group %s: %d -> %s (plan epoch %d); running workers re-plan within one heartbeat\n",
		group, res.OldN, cli.Count(res.NewN, "slot"), res.Epoch)
	if before.Finished() {
		fmt.Fprintln(out, reopenedText(before.Meta["mode"]))
	}
	return nil
}

// reopenedText says what scaling a finished group did: its slots are open again under the new
// plan, and the next 'work --once' finishes them handling nothing done already.
func reopenedText(mode string) string {
	reads := "reading nothing again"
	if mode == "filter" {
		reads = "each slot reading its new share again, reads only"
	}
	return "the group had finished: it is open again (finished=false) until a 'dynapart work --once' " +
		"of it finishes the new plan's slots, handling no item already done (" + reads + ")"
}
