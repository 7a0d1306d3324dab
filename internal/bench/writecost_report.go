package bench

import "fmt"

// sum adds two samples repetition by repetition.
func sum(a, b Sample) Sample { return zipS(a, b, func(x, y float64) float64 { return x + y }) }

// diff subtracts base from s repetition by repetition.
func diff(s, base Sample) Sample { return zipS(s, base, func(x, y float64) float64 { return x - y }) }

func zipS(a, b Sample, f func(x, y float64) float64) Sample {
	out := make(Sample, 0, min(len(a), len(b)))
	for i := range min(len(a), len(b)) {
		out = append(out, f(a[i], b[i]))
	}
	return out
}

func (r *Results) writeCostSection(w writer) {
	w("## Where the time goes at concurrency 1\n\n")
	wc := r.WriteCost
	if wc == nil {
		pending(w, ScenarioWriteCost, r.Errors[ScenarioWriteCost])
		return
	}
	w("Measured in this run. **Each write alone**: on a fresh table, item by item in turn (so a burst of load hits every kind alike), "+
		"one request at a time, %s items per kind: the hand loop's write, and Run's own writes, captured from a Run over a one-item table "+
		"(what Run sends for an item it saw with no state; like Run, 1 write in 16 of each kind asks for its consumed capacity). "+
		"Mean latency per write; the ratio is the hand loop's "+
		"write time ÷ the row's, the most items/s a variant can reach at concurrency 1 against the hand loop if nothing but its writes cost time.\n\n",
		num(float64(wc.Items), 0))
	w("| write | µs: median (min–max) | hand loop's write ÷ it |\n|---|---|---|\n")
	claimPair := sum(wc.Claim, wc.Completion)
	for _, row := range []struct {
		what string
		s    Sample
	}{
		{"hand loop: `SET done_at` if `attribute_not_exists(done_at)`", wc.Hand},
		{"Run, complete-only: status, done_at and the write's id, if the item exists and has no status", wc.CompleteOnly},
		{"Run, claim: status, owner, slot, token, scope, claim id, claim_until, attempt 1", wc.Claim},
		{"Run, completion: status and done_at, fenced on status and claim id", wc.Completion},
		{"**Run, claim + completion**", claimPair},
	} {
		w("| %s | %s | %s |\n", row.what, row.s.Fmt(0, ""), Ratio(wc.Hand, row.s).X())
	}
	w("\n**Each pass as a whole**: Run (complete-only) and the hand loop at concurrency 1 on a fresh table of %s items each, "+
		"every item write timed at the client: the start (to the first item write: Run's plan, lease and first scans, with no unit markers in a one-slot group; the loop's scan), "+
		"the item writes, the time between one write's answer and the next write (Run's pipeline: hand-off, handler, counters, and any wait "+
		"for the scanner at a segment's end; the loop's channel), and the end (after the last write's answer: for Run any segments still to scan, "+
		"its checkpoint, stealing check and lease release). The writes are one at a time, so in each repetition the four parts add up to the pass.\n\n",
		num(float64(wc.TimelineItems), 0))
	w("| at concurrency 1 | hand loop | Run, complete-only | Run minus the hand loop |\n|---|---|---|---|\n")
	for _, row := range []struct {
		what      string
		loop, run Sample
		prec      int
	}{
		{"start to the first item write, ms", wc.Loop.Start, wc.Run.Start, 1},
		{"item write, µs (mean)", wc.Loop.Write, wc.Run.Write, 0},
		{"from one write's answer to the next write, µs (mean)", wc.Loop.Gap, wc.Run.Gap, 0},
		{"last write's answer to the return, ms", wc.Loop.End, wc.Run.End, 1},
	} {
		w("| %s | %s | %s | %s |\n", row.what, row.loop.Fmt(row.prec, ""), row.run.Fmt(row.prec, ""), diff(row.run, row.loop).Fmt(row.prec, ""))
	}
	w("| items/s | %s | %s | %s |\n", wc.Loop.ItemsPerSec.Fmt(0, ""), wc.Run.ItemsPerSec.Fmt(0, ""), Ratio(wc.Run.ItemsPerSec, wc.Loop.ItemsPerSec).X())
	w("\n%s\n\n", r.writeCostSplit())
}

// writeCostSplit divides the time Run took beyond the hand loop in the timelines into its parts:
// each is the median of its differences repetition by repetition, so they need not add up exactly.
func (r *Results) writeCostSplit() string {
	wc := r.WriteCost
	d := func(run, loop Sample) string { return num(diff(run, loop).Median(), 0) }
	return fmt.Sprintf("Run took %s ms (median, repetition by repetition) beyond the hand loop's %s ms: %s ms in its start, %s ms in its item writes, "+
		"%s ms between writes and %s ms in its end (medians of each part's differences, so they need not add up exactly). "+
		"What one write costs alone is in the first table; inside Run an item write also shares DynamoDB Local and the machine's %s CPUs "+
		"with Run's scans of the table's segments (a request each, a few in flight), sent while it writes, where the hand loop's 4 scans read the table at its start.",
		d(wc.Run.Elapsed, wc.Loop.Elapsed), num(wc.Loop.Elapsed.Median(), 0), d(wc.Run.Start, wc.Loop.Start), d(wc.Run.Writes, wc.Loop.Writes),
		d(wc.Run.Gaps, wc.Loop.Gaps), d(wc.Run.End, wc.Loop.End), r.Machine.CPUs)
}
