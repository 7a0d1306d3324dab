package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The follow scenario's arithmetic and its section of the report.
//
// What is counted over which span of a run (see FollowRun): a rescan's reads are paid by the
// clock (a pass every poll, whatever changed), so they are counted over the writer's window and
// divided by the changes written in it; a follow worker's reads and all ledger writes are paid
// per change, so they are counted until every change of the window was handled (the drain), which
// for rescans would add a pass the window's changes did not cause, and for follow leaves out no
// work its changes did cause.

// FollowGoalX is issue 35's goal: a continuous worker that follows the stream reads at least this
// many times fewer units per change than one that rescans at the default poll.
const FollowGoalX = 100

// readSpan is the span a run's reads (and its lease table's units) are counted over: the drain
// for a follow worker, the window for rescans.
func (r *FollowRun) readSpan() FollowCounts {
	if r.Follow {
		return r.Drained
	}
	return r.Window
}

// perChange divides v by the changes written; NaN when there were none.
func (r *FollowRun) perChange(v float64) float64 {
	if r.Changes == 0 {
		return math.NaN()
	}
	return v / float64(r.Changes)
}

// RCUPerChange is the read units per change by the worker's Stats: its scans and its reads of
// changed items.
func (r *FollowRun) RCUPerChange() float64 {
	s := r.readSpan()
	return r.perChange(s.ScanRCU + s.FollowRCU)
}

// WCUPerChange is the ledger's write units per change by the worker's Stats.
func (r *FollowRun) WCUPerChange() float64 { return r.perChange(r.Drained.WCU) }

// BilledPerChange is the job table's read and write units per change by DynamoDB's billing rules
// (every request the worker sent), over the same spans as RCUPerChange and WCUPerChange.
func (r *FollowRun) BilledPerChange(table string) Units {
	return Units{RCU: r.perChange(r.readSpan().Bill.Tables[table].RCU), WCU: r.perChange(r.Drained.Bill.Tables[table].WCU)}
}

// LeasePerChange is the units per change of every other table (the lease table: heartbeats,
// checkpoints, the stream's shard leases), by DynamoDB's billing rules, over the read span.
func (r *FollowRun) LeasePerChange(table string) Units {
	var u Units
	for t, tb := range r.readSpan().Bill.Tables {
		if t != table {
			u.RCU, u.WCU = u.RCU+tb.RCU, u.WCU+tb.WCU
		}
	}
	return Units{RCU: r.perChange(u.RCU), WCU: r.perChange(u.WCU)}
}

// StreamPerChange is the stream requests per change (a follow worker's, until the drain).
func (r *FollowRun) StreamPerChange() float64 { return r.perChange(float64(r.Drained.Stream.Total())) }

// Percentile is the p-th latency (nearest rank; 0.5 the median, 1 the largest); -1 when no change
// was seen.
func (r *FollowRun) Percentile(p float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return -1
	}
	i := int(math.Ceil(p*float64(n))) - 1
	return r.Latencies[min(max(i, 0), n-1)]
}

// followed is the run that follows the stream, or nil.
func (f *Follow) followed() *FollowRun {
	for _, r := range f.Runs {
		if r.Follow {
			return r
		}
	}
	return nil
}

// rescans is the rescans run at poll, or nil.
func (f *Follow) rescans(poll time.Duration) *FollowRun {
	for _, r := range f.Runs {
		if !r.Follow && r.Poll == poll {
			return r
		}
	}
	return nil
}

// ReadRatio is a rescans run's read units per change ÷ the follow run's (empty when either is
// missing or follow read nothing).
func (f *Follow) ReadRatio(rescans *FollowRun) Sample {
	fw := f.followed()
	if fw == nil || rescans == nil {
		return nil
	}
	return Ratio(Sample{rescans.RCUPerChange()}, Sample{fw.RCUPerChange()})
}

func sortDurations(ds []time.Duration) { slices.Sort(ds) }

// fmtSeconds is a latency in seconds, "1.23 s"; "–" for none (negative).
func fmtSeconds(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return num(d.Seconds(), 2) + " s"
}

// latencyCell is "p50 / p95 / max" of a run.
func (r *FollowRun) latencyCell() string {
	return fmtSeconds(r.Percentile(0.5)) + " / " + fmtSeconds(r.Percentile(0.95)) + " / " + fmtSeconds(r.Percentile(1))
}

// defaultPoll is the worker's default PollInterval of a continuous worker, the rescans run the
// goal is set against.
const defaultPoll = 30 * time.Second

func (r *Results) followSection(w writer) {
	w("## Following the stream versus continuous rescans\n\n")
	f := r.Follow
	if f == nil {
		pending(w, ScenarioFollow, r.Errors[ScenarioFollow])
		return
	}
	c := f.Config
	perMin := time.Minute.Seconds() / c.WriteEvery.Seconds()
	fw := f.followed()
	w("Issue 35: one continuous worker (the library, segment mode, `Workers` 1, inline ledger, claim+complete, concurrency 16, a handler that notes when it sees each change) "+
		"on a table of %s items (seeded as everywhere here: id, n, a 100-byte payload) whose stream (new and old images) is on before any worker starts. "+
		"**follow**: `Follow` at the default `StreamPoll`; its first pass is the back-fill (%s, not measured), and the measurement starts once its reader has also read the records of the pass's own writes. "+
		"**rescans**: the same worker without `Follow`, at `PollInterval` 30 s (the default) and 1 s (a poll whose latency is follow's), on the same table after follow's run, each in a group of its own, measured from the end of its own first pass (which finds every item done). "+
		"In every run a writer changes %s random items a minute for %s (an UpdateItem every %s, `SET payload` to a new value; the same items in the same order in every run). "+
		"For the rescans the write also removes `dp_status` and `dp_done_at` (README, *Reprocessing items*): a rescan skips a done item whatever its content, so without it no change would reach the handler; "+
		"the reads do not depend on it (a rescan reads every item either way). One run each (they are minutes long): no spread.\n\n",
		num(float64(c.Items), 0), fmtSeconds(f.Backfill.Round(time.Second)), num(perMin, 0), num(c.Window.Seconds(), 0)+" s", c.WriteEvery)
	head := []string{"figure"}
	for _, run := range f.Runs {
		head = append(head, run.Name())
	}
	w("| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	row := func(label string, cell func(run *FollowRun) string) {
		cells := []string{label}
		for _, run := range f.Runs {
			cells = append(cells, cell(run))
		}
		w("| %s |\n", strings.Join(cells, " | "))
	}
	table := f.Table
	row("changes written in the window", func(run *FollowRun) string { return num(float64(run.Changes), 0) })
	row("**read units per change** (Stats: scans + reads of changed items)", func(run *FollowRun) string { return "**" + num(run.RCUPerChange(), 2) + "**" })
	row("**rescans ÷ follow, read units per change**", func(run *FollowRun) string {
		if run.Follow {
			return "1x"
		}
		if fw != nil && fw.RCUPerChange() == 0 && run.RCUPerChange() > 0 {
			// No table read per change at all: the ratio is unbounded.
			if run.Poll == defaultPoll {
				return "**∞** (goal >= 100x)"
			}
			return "**∞**"
		}
		x := f.ReadRatio(run)
		if run.Poll == defaultPoll {
			return "**" + x.GoalX(atLeast(FollowGoalX)) + "** (goal >= 100x)"
		}
		return "**" + x.X() + "**"
	})
	row("rescans ÷ follow, read units per change of the job and lease tables together", func(run *FollowRun) string {
		if run.Follow || fw == nil {
			return "1x"
		}
		all := func(r *FollowRun) float64 { return r.RCUPerChange() + r.LeasePerChange(table).RCU }
		x := Ratio(Sample{all(run)}, Sample{all(fw)})
		if run.Poll == defaultPoll {
			return x.GoalX(atLeast(FollowGoalX))
		}
		return x.X()
	})
	row("write units per change (Stats: the ledger's writes)", func(run *FollowRun) string { return num(run.WCUPerChange(), 2) })
	row("job table by DynamoDB's billing rules, RCU / WCU per change", func(run *FollowRun) string {
		u := run.BilledPerChange(table)
		return num(u.RCU, 2) + " / " + num(u.WCU, 2)
	})
	row("lease table (heartbeats, checkpoints, shard leases), RCU / WCU per change", func(run *FollowRun) string {
		u := run.LeasePerChange(table)
		return num(u.RCU, 2) + " / " + num(u.WCU, 2)
	})
	row("stream requests per change (GetRecords / GetShardIterator / DescribeStream)", func(run *FollowRun) string {
		if !run.Follow {
			return "–"
		}
		s := run.Drained.Stream
		return fmt.Sprintf("%s (%s / %s / %s)", num(run.StreamPerChange(), 2), num(float64(s.GetRecords), 0), num(float64(s.GetShardIterator), 0), num(float64(s.DescribeStream), 0))
	})
	row("passes over the share in the window; read units per pass", func(run *FollowRun) string {
		if run.Window.Passes == 0 {
			return "0"
		}
		return num(float64(run.Window.Passes), 0) + "; " + num(run.Window.ScanRCU/float64(run.Window.Passes), 0)
	})
	row("**write → handler: p50 / p95 / max**", func(run *FollowRun) string { return "**" + run.latencyCell() + "**" })
	row("changes superseded (a later change of the item handled first) / never handled", func(run *FollowRun) string {
		return fmt.Sprintf("%d / %d", run.Superseded, run.Unseen)
	})
	w("\nCounted spans: a rescan's reads are paid by the clock (a pass every poll, whatever changed), so its reads and lease-table units are counted over the writer's window "+
		"and divided by the changes written in it; follow's reads and every run's ledger writes are paid per change, so they are counted until every change of the window was handled "+
		"(follow: %s after the window's start; counting a rescan's reads that far would add a pass the window's changes did not cause). "+
		"A rescan reads in bursts (a pass, then the poll's wait), so where the bursts fall in the window moves its figure by up to one pass's read units ÷ the changes (read units per pass: the scans' units in the window ÷ the passes completed in it). "+
		"Read units are those DynamoDB Local reported (scans eventually consistent; a changed item's read consistent, 1 RCU up to 4 KB); the billing-rules rows count every request the worker sent "+
		"by DynamoDB's published rules (see *What a job costs by DynamoDB's billing rules*). "+
		"Follow's per-change work: the record's new image carries the item's state (inline ledger), so the first look needs no read; the item is finished at an older version, so it is reopened (Renew, a write) "+
		"and claimed (the claim returns the item as of the claim: no read) and completed as in a pass: 3 ledger writes and no table read per change, where a rescan claims and completes (2 writes). "+
		"The lease table's reads (the group's meta item, read every heartbeat: half a unit, eventually consistent; the look for free shards) are paid by the clock by both; with them, the ratio row below the first counts every table. "+
		"Stream reads are not table read units: DynamoDB prices them apart (per GetRecords request); an idle follow worker polls each shard once per `StreamPoll`. "+
		"Latency is from the writer's UpdateItem call to the handler's first sight of the new value; a rescan's is up to a poll interval plus a pass.\n\n",
		fmtSeconds(followDrainSpan(fw)))
}

// followDrainSpan is the follow run's drained span, -1 without one.
func followDrainSpan(fw *FollowRun) time.Duration {
	if fw == nil {
		return -1
	}
	return fw.Drained.Span
}

// followGoals are issue 35's rows of the summary.
func (r *Results) followGoals() []Goal {
	f := r.Follow
	if f == nil {
		return nil
	}
	fw := f.followed()
	if fw == nil {
		return nil
	}
	items := num(float64(f.Config.Items), 0)
	perMin := num(time.Minute.Seconds()/f.Config.WriteEvery.Seconds(), 0)
	var gs []Goal
	for _, rs := range f.Runs {
		if rs.Follow {
			continue
		}
		x := f.ReadRatio(rs)
		// Three decimals: two could round a figure just below the goal up to it.
		shown, met := x.GoalX(atLeast(FollowGoalX)), len(x) > 0 && x.Median() >= FollowGoalX
		if fw.RCUPerChange() == 0 && rs.RCUPerChange() > 0 {
			shown, met = "∞", true // no table read per change at all
		}
		measured := fmt.Sprintf("%s (rescans %s, follow %s RCU per change)", shown, num(rs.RCUPerChange(), 3), num(fw.RCUPerChange(), 3))
		if rs.Poll == defaultPoll {
			gs = append(gs, Goal{fmt.Sprintf("follow vs continuous rescans every %s (the default poll), %s items, %s changes a minute: read units per change", rs.Poll, items, perMin),
				fmt.Sprintf(">= %dx fewer (issue 35)", FollowGoalX), measured, verdict(met)})
			all := func(r *FollowRun) float64 { return r.RCUPerChange() + r.LeasePerChange(f.Table).RCU }
			xa := Ratio(Sample{all(rs)}, Sample{all(fw)})
			gs = append(gs, Goal{"… counting the lease table's reads too (the group's meta item every heartbeat, shard looks: paid by the clock by both)",
				fmt.Sprintf(">= %dx fewer", FollowGoalX), fmt.Sprintf("%s (rescans %s, follow %s RCU per change)", xa.GoalX(atLeast(FollowGoalX)), num(all(rs), 3), num(all(fw), 3)),
				verdict(len(xa) > 0 && xa.Median() >= FollowGoalX)})
		} else {
			gs = append(gs, Goal{fmt.Sprintf("… vs rescans every %s (a poll with follow's latency)", rs.Poll), "reported", x.X() + fmt.Sprintf(" (rescans %s RCU per change)", num(rs.RCUPerChange(), 2)), "–"})
		}
	}
	var wcu, lat []string
	allSeen := true
	for _, run := range f.Runs {
		wcu = append(wcu, fmt.Sprintf("%s: %s", run.Name(), num(run.WCUPerChange(), 2)))
		lat = append(lat, fmt.Sprintf("%s: %s", run.Name(), run.latencyCell()))
		allSeen = allSeen && run.Unseen == 0
	}
	gs = append(gs,
		Goal{"follow vs rescans: ledger write units per change", "reported", strings.Join(wcu, "<br>"), "–"},
		Goal{"time from a write to its handler (p50 / p95 / max), default poll settings", "reported (rescans: up to a poll interval)", strings.Join(lat, "<br>"), "–"},
		Goal{"follow and rescans: every change of the window handled", "all (or superseded by a later change of the item)", followUnseen(f), verdict(allSeen)})
	return gs
}

// followUnseen lists each run's changes never handled.
func followUnseen(f *Follow) string {
	var parts []string
	for _, run := range f.Runs {
		parts = append(parts, fmt.Sprintf("%s: %d of %d unhandled", run.Name(), run.Unseen, run.Changes))
	}
	return strings.Join(parts, "<br>")
}
