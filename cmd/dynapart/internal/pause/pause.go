// Package pause is `dynapart pause` and `dynapart resume`.
package pause

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// New and NewResume set and clear a group's pause flag (lock.PauseGroup).
func New(g *cli.Globals) *cobra.Command {
	return pauseCmd(g, true)
}

// NewResume is `dynapart resume`.
func NewResume(g *cli.Globals) *cobra.Command {
	return pauseCmd(g, false)
}

func pauseCmd(g *cli.Globals, pause bool) *cobra.Command {
	var group, leaseTable string
	var limits lock.Limits
	cmd := &cobra.Command{
		Use:   "pause",
		Short: "Pause a group: its workers stop claiming items but keep their slots",
		Long: `Sets the pause flag on the group's meta item in the lease table. Every worker of the group reads
the flag once per heartbeat (--heartbeat, default lease-ttl/3), so within one heartbeat it stops
claiming: handlers in flight finish and record their outcome, batch claims whose handler has not
started are released, nothing new is claimed. The workers keep their slots (the leases are renewed,
not released), a once-worker does not mark its slot finished while paused, and status, the work
progress line and the metrics (dynapart_paused) say paused. 'dynapart resume' clears the flag: the
passes go on from where they stopped.

Pausing a paused group is a no-op (exit 0, "already paused"). A group that does not exist (no
meta item: never run, or a typo) exits 2 and nothing is written.`,
		Example: `  dynapart pause --group users/default
  dynapart resume --group users/default`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPause(cmd, g, pauseArgs{group: group, leaseTable: leaseTable, pause: pause, limits: limits})
		},
	}
	if !pause {
		cmd.Use = "resume"
		cmd.Short = "Resume a paused group: its workers claim again from their checkpoints"
		cmd.Long = `Clears the group's pause flag (see 'dynapart pause'). Within one heartbeat every worker of the
group claims again; each pass goes on from where it stopped, nothing already read is read again
beyond the page in progress. Resuming a group that is not paused is a no-op (exit 0). A group that
does not exist exits 2 and nothing is written.

A group that paused itself at its budget (work --max-wcu/--max-rcu; status says "PAUSED (budget
reached: ...)") needs a larger budget before it goes on: --max-wcu and --max-rcu record it first,
then resume; a resume that leaves the group at its budget (without them, or with a limit not above
what a unit at its budget used) is refused (exit 2, the figures named, nothing written), as its
workers would pause it again. A budget below what the group has consumed is refused with exit 2,
the figures named, and nothing written.`
		cmd.Example = `  dynapart resume --group users/default
  dynapart resume --group users/default --max-wcu 200000`
		cmd.Flags().Float64Var(&limits.WCU, "max-wcu", 0, "raise the group's write budget to this many WCU in all, then resume")
		cmd.Flags().Float64Var(&limits.RCU, "max-rcu", 0, "raise the group's read budget to this many RCU in all, then resume")
	}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "lease group (required; work's default is TABLE/JOB)")
	f.StringVar(&leaseTable, "lease-table", worker.DefaultLeaseTable, "lease table")
	return cmd
}

// pauseArgs are pause's and resume's flags.
type pauseArgs struct {
	group, leaseTable string
	pause             bool
	limits            lock.Limits // resume: the budget to record first (zero: none)
}

func runPause(cmd *cobra.Command, g *cli.Globals, a pauseArgs) error {
	group, leaseTable, pause := a.group, a.leaseTable, a.pause
	if group == "" {
		return cli.Usagef("--group is required (the work command's --group, default TABLE/JOB)")
	}
	if err := checkLimits(cmd, a.limits); err != nil {
		return err
	}
	ctx := cmd.Context()
	lc, err := g.LeaseClient(ctx, leaseTable)
	if err != nil {
		return err
	}
	if !pause {
		if err := refuseAtBudget(cmd, lc, group, leaseTable, a.limits); err != nil {
			return err
		}
	}
	if a.limits != (lock.Limits{}) {
		b, err := lc.SetBudget(ctx, group, a.limits)
		if errors.Is(err, lock.ErrGroupNotFound) {
			return cli.GroupNotFound(group, leaseTable)
		}
		if err != nil {
			return err // a budget below the consumption is a usage error (exit 2), with its figures
		}
		fmt.Fprintf(cmd.OutOrStdout(), "group %s: budget %s\n", group, BudgetText(b))
	}
	set, verb := lc.ResumeGroup, "resumed"
	if pause {
		set, verb = lc.PauseGroup, "paused"
	}
	changed, err := set(ctx, group)
	if errors.Is(err, lock.ErrGroupNotFound) {
		return cli.GroupNotFound(group, leaseTable)
	}
	if err != nil {
		return err
	}
	return printPause(cmd, group, verb, changed)
}

// refuseAtBudget refuses a resume of a group that would still be at its budget once limits are
// recorded (no larger budget given, another unit's raised, or a limit equal to the consumption):
// its workers would pause it again at their next report (helper-76: "resumed", then paused again
// 16 items later; helper-80: the same through --max-rcu or --max-wcu). A limit below the
// consumption is left to SetBudget, which refuses it naming the figures. Nothing is written.
func refuseAtBudget(cmd *cobra.Command, lc *lock.Client, group, leaseTable string, limits lock.Limits) error {
	st, err := lc.GroupState(cmd.Context(), group)
	if errors.Is(err, lock.ErrGroupNotFound) {
		return cli.GroupNotFound(group, leaseTable)
	}
	if err != nil {
		return err
	}
	b := st.Budget
	if limits.WCU < b.UsedWCU && limits.WCU > 0 || limits.RCU < b.UsedRCU && limits.RCU > 0 {
		return nil // below the consumption: SetBudget's refusal says so
	}
	if limits.WCU > 0 {
		b.MaxWCU = limits.WCU
	}
	if limits.RCU > 0 {
		b.MaxRCU = limits.RCU
	}
	if !b.Reached() {
		return nil
	}
	return cli.Usagef("group %s would still be at its budget (%s): its workers would pause it again; resume with "+
		"a --max-wcu or --max-rcu above what it used, for each unit at its budget (nothing written)", group, BudgetText(b))
}

func printPause(cmd *cobra.Command, group, verb string, changed bool) error {
	out := cmd.OutOrStdout()
	switch {
	case !changed && verb == "paused":
		fmt.Fprintf(out, "group %s: already paused (no change)\n", group)
	case !changed:
		fmt.Fprintf(out, "group %s: not paused (no change)\n", group)
	case verb == "paused":
		fmt.Fprintf(out, "group %s: paused; its workers stop claiming within one heartbeat and keep their slots\n", group)
	default:
		fmt.Fprintf(out, "group %s: resumed; its workers claim again within one heartbeat\n", group)
	}
	return nil
}

// BudgetText is a budget and its consumption as status and resume print it, e.g.
// "1200.0 of 5000 WCU, 310.5 of 1000 RCU" (a unit without a budget shows its consumption only).
func BudgetText(b lock.Budget) string {
	part := func(used, max float64, unit string) string {
		if max > 0 {
			return fmt.Sprintf("%.1f of %g %s", used, max, unit)
		}
		return fmt.Sprintf("%.1f %s (no budget)", used, unit)
	}
	return part(b.UsedWCU, b.MaxWCU, "WCU") + ", " + part(b.UsedRCU, b.MaxRCU, "RCU")
}
