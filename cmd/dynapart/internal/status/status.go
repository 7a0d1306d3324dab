// Package status is `dynapart status`: a group's slots for people (status.go), the status
// document of --json (document.go, with the slots' progress from progress.go and their units from
// plan.go) and the live page that serves it (--serve: page.go and web/, also served by a worker's
// --metrics-addr). The page's server samples the group on its own clock (sampler.go, throughput.go)
// and reads the ledger at an interval of its own (ledgerread.go), both metered (cost.go); where
// the ledger is comes from the group's meta item (groupledger.go). A group that follows its
// table's stream gets its shards, owners, positions and lag (stream.go, read by streamread.go).
package status

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/pause"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// slotJSON is a slot as `status --json` prints it.
type slotJSON struct {
	Slot       int       `json:"slot"`
	Owner      string    `json:"owner"`
	Token      int64     `json:"token"`
	Version    int64     `json:"version"`
	Held       bool      `json:"held"`
	ExpiresAt  time.Time `json:"expires_at"`
	Released   bool      `json:"released"`
	Finished   bool      `json:"finished"`
	Checkpoint string    `json:"checkpoint,omitempty"`
	// Epoch is the plan epoch the slot was last taken under; Segments the units (segments, or
	// shards in index mode) the slot owns under the group's current plan, as ranges ("0-11"),
	// "all" in filter mode, "" for a slot beyond N (retired by a scale-down: Retired).
	Epoch    int64  `json:"epoch"`
	Segments string `json:"segments"`
	Retired  bool   `json:"retired,omitempty"`
}

type statusJSON struct {
	Group    string            `json:"group"`
	Workers  int               `json:"workers"`
	Epoch    int64             `json:"epoch"` // the plan epoch: +1 per 'dynapart scale'
	Meta     map[string]string `json:"meta,omitempty"`
	Finished bool              `json:"finished"`
	Paused   bool              `json:"paused"`
	Reason   string            `json:"-"` // why paused
	Budget   lock.Budget       `json:"-"`
	Slots    []slotJSON        `json:"slots"`
}

const statusLong = `Shows, for each slot of --group: the owner (worker id), its fencing token, whether the lease is
held now and until when, whether the slot's share is finished, and how far its checkpoint is.
The group of a work command is TABLE/JOB unless --group was given (e.g. users/default).

The group line says PAUSED while the group is paused (dynapart pause, or by itself when it reached
its budget: work --max-wcu/--max-rcu), and a budget line shows the units its workers reported
consuming against it (JSON: "paused_reason" and "budget"). Below the slots, each
slot's progress as saved with its checkpoint: pass, items done and failed, items read in this
pass, the rate and the ETA of the pass, the group's sums, and a line with the group's fraction
done, items left and ETA (the shares of free slots counted at the group's rate). Rates and ETAs
come only from slots a live worker holds: a slot nobody holds shows "-" and "no worker", and a
group with shares left and no worker says "ETA unknown" (JSON: eta_seconds null). A slot's share
is estimated as the table's item count (DescribeTable) / N, so the ETA is an estimate. No scan
of the table.

A group that follows its table's stream (work --follow; shown once a slot has read its share and
follows the stream: its position says "following the stream") gets a stream section: the
stream's ARN, its lag (the age of the oldest record after a shard's position, the largest over the
shards; 0: caught up) and per shard its parent, owner (the worker holding its lease, or free),
whether it is finished (read to its end) and its position (the sequence number of the last record
resolved) and lag (JSON: "stream", null for other groups). A read of the stream costs one
DescribeStream and, per shard not finished, one GetItem of its lease, one GetShardIterator and
one GetRecords of one record (and a DescribeTable for the stream's ARN once a minute); the page
reads it at most every 5 s. Record creation times are rounded down by DynamoDB (DynamoDB
Local: to the minute), so a lag is rounded up. A following slot's done and failed include the
items the stream brought (saved with its checkpoint). The versions superseded and unchanged are
each worker's counters, not in the lease table: they are in its --progress and --metrics-addr
(dynapart_follow_*, and its page's worker section).

The source table, the ledger, the job, the ledger table and the attribute prefix are read from
the group's meta item (the work command recorded them): --table and the ledger flags are not
needed, and one that disagrees with the group is refused (exit 2).

A group that does not exist (no 'dynapart work' of it has started, or a typo) exits 2 naming
it, also with --json; --serve serves it anyway (a page started before the job), with "exists":
false until a worker takes a slot.

--json prints one JSON document: the slots (with their state: working, finished, released,
expired or free, and progress), the paused flag, the group's progress, throughput and ETA; with
--table also the ledger's exact item counts and dead letters (one read of the ledger: a scan).

--serve ADDR serves a live page with the same data (slots with progress bars, the overall bar,
throughput over time, ETA, dead letters with their errors) that refreshes itself, and the
document at /api/status; it runs until interrupted. The page's server reads the group every
--interval whether or not anyone watches, so the chart has the job's history from before the
first view, and the ledger every --ledger-interval (default 5m), one read at a time, shown with
its age and its cost in read units; a view reads nothing, so an open page costs one Query of the
lease table per --interval plus one ledger read per --ledger-interval (and a followed stream's
read every 5 s) however many people watch.
The page's files are in the binary.`

// New is `dynapart status`.
func New(g *cli.Globals) *cobra.Command {
	var group, leaseTable string
	var asJSON bool
	var live pageFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a group's slots: owner, token, expiry, checkpoint, finished; a followed stream's shards and lag",
		Long:  statusLong,
		Example: `  dynapart status --group users/default
  dynapart status --group users/default --json | jq '.slots[] | select(.held)'
  dynapart status --group users/default --json --table users | jq .items
  dynapart status --group users/default --serve 127.0.0.1:8080 --ledger-interval 10m`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if group == "" {
				return cli.Usagef("--group is required (the work command's --group, default TABLE/JOB)")
			}
			if asJSON || live.serve != "" {
				return live.run(cmd, g, group, leaseTable)
			}
			return printStatus(cmd, g, group, leaseTable, live.ledger)
		},
	}
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "lease group (required; work's default is TABLE/JOB)")
	f.StringVar(&leaseTable, "lease-table", worker.DefaultLeaseTable, "lease table")
	f.BoolVar(&asJSON, "json", false, "print JSON for scripts (the document the live page serves)")
	live.add(f)
	return cmd
}

// printStatus prints the group for people: its settings and slots, their progress, and the
// stream of a group that follows one.
func printStatus(cmd *cobra.Command, g *cli.Globals, group, leaseTable string, ledger cli.LedgerFlags) error {
	ctx := cmd.Context()
	lc, db, err := g.LeaseClientAndDB(ctx, leaseTable)
	if err != nil {
		return err
	}
	st, err := lc.GroupStatus(ctx, group)
	if err != nil {
		return err
	}
	if !groupExists(st) {
		return cli.GroupNotFound(group, leaseTable)
	}
	if err := checkLedgerFlags(cmd.Flags(), ledger, st.Meta); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	text := statusJSON{Group: group, Workers: st.N, Epoch: st.Epoch, Meta: st.Meta, Finished: st.Finished(), Paused: st.Paused,
		Reason: st.PausedReason, Budget: st.Budget}
	plan := planOf(st)
	for _, s := range st.Slots {
		text.Slots = append(text.Slots, newSlotJSON(s, plan))
	}
	printText(out, text)
	printProgressText(out, st.Slots, st.N, estimateItems(ctx, db, st.Meta["table"]), st.Paused)
	if !follows(st) {
		return nil
	}
	streams, err := g.StreamsClient(ctx)
	if err != nil {
		return err
	}
	printStreamText(out, newStreamWatch(streams, db, lc, group).doc(ctx, st, time.Now()))
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printText prints the group for people: settings as sorted key=value, then a row per slot
// with its position as passes and segments done.
func printText(w io.Writer, st statusJSON) {
	paused := ""
	switch {
	case st.Paused && st.Reason == lock.PausedByBudget:
		paused = ", PAUSED (budget reached: dynapart resume --max-wcu/--max-rcu to raise it and go on)"
	case st.Paused:
		paused = ", PAUSED (dynapart resume to go on)"
	}
	fmt.Fprintf(w, "group %s: %s, plan epoch %d, finished=%v%s\n", st.Group, cli.Count(st.Workers, "slot"), st.Epoch, st.Finished, paused)
	if st.Budget.Set() {
		fmt.Fprintf(w, "budget: %s consumed\n", pause.BudgetText(st.Budget))
	}
	if len(st.Meta) > 0 {
		keys := make([]string, 0, len(st.Meta))
		for k := range st.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintln(w, "settings:")
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%s\n", k, st.Meta[k])
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tOWNER\tTOKEN\tHELD\tEXPIRES\tFINISHED\tUNITS\tPOSITION")
	for _, s := range st.Slots {
		exp := "-"
		if !s.ExpiresAt.IsZero() {
			exp = s.ExpiresAt.Format(time.RFC3339)
		}
		units := orDash(s.Segments)
		if s.Retired {
			units = "retired (beyond N)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%v\t%s\t%v\t%s\t%s\n", s.Slot, orDash(s.Owner), s.Token, s.Held, exp, s.Finished, units, positionSummary(s.Checkpoint)+oldPlanNote(s.Checkpoint, st.Epoch))
	}
	_ = tw.Flush()
}

// positionSummary says how far a slot's checkpoint got: "pass 2, 3/4 segments done".
func positionSummary(cp string) string {
	if cp == "" {
		return "-"
	}
	p, err := worker.ParseSlotProgress(cp)
	if followsStream(cp) { // the pass that read the share is complete: Pass counts it
		return fmt.Sprintf("pass %d read, following the stream", p.Pass)
	}
	if rescansTable(cp) {
		return fmt.Sprintf("pass %d, rescanning the whole table (the stream may have lost records)", p.Pass+1)
	}
	if err != nil {
		return fmt.Sprintf("unreadable checkpoint (%s)", cli.Count(len(cp), "byte"))
	}
	unit := "segments"
	if p.Position.Mode == scan.ModeIndex {
		unit = "shards"
	}
	s := fmt.Sprintf("pass %d", p.Pass+1)
	if done, total := p.SegmentsDone(); total > 0 {
		s += fmt.Sprintf(", %d/%d %s done", done, total, unit)
	} else {
		s += ", not started"
	}
	if p.Dirty {
		s += ", another pass needed"
	}
	return s
}

// oldPlanNote marks a position saved under an earlier plan than the group's epoch (a slot not
// taken again since a scale): its segments are the old plan's, not the slot's now.
func oldPlanNote(cp string, epoch int64) string {
	if cp == "" {
		return ""
	}
	p, err := worker.ParseSlotProgress(cp)
	if (err != nil && !followsStream(cp) && !rescansTable(cp)) || p.Epoch >= epoch {
		return ""
	}
	return fmt.Sprintf(" (plan epoch %d's, before a scale)", p.Epoch)
}

// newSlotJSON is the slot s of a lock group under its current plan.
func newSlotJSON(s lock.SlotStatus, plan groupPlan) slotJSON {
	return slotJSON{Slot: s.Slot, Owner: s.Owner, Token: s.Token, Version: s.Version, Held: s.Held,
		ExpiresAt: s.ExpiresAt, Released: s.Released, Finished: s.Finished, Checkpoint: s.Checkpoint,
		Epoch: s.Epoch, Segments: plan.units(s.Slot), Retired: s.Slot >= plan.n && plan.n > 0}
}

// groupExists reports a group that has a plan or slots: a 'dynapart work' of it has started.
func groupExists(st *lock.GroupStatus) bool { return st.N > 0 || len(st.Slots) > 0 }
