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
		"(what Run sends for an item it saw with no state, sent here without `ReturnConsumedCapacity`, which Run asks for on 1 write in 16). "+
		"The last row is a what-if, not dynapart's data model: a claim that keeps scope, slot, token and owner in one attribute, "+
		"and a completion fenced on the status, that attribute and the attempt count. Mean latency per write; the ratio is the hand loop's "+
		"write time ÷ the row's, the most items/s a variant can reach at concurrency 1 against the hand loop if nothing but its writes cost time.\n\n",
		num(float64(wc.Items), 0))
	w("| write | µs: median (min–max) | hand loop's write ÷ it |\n|---|---|---|\n")
	claimPair, oneAttrPair := sum(wc.Claim, wc.Completion), sum(wc.OneAttrClaim, wc.OneAttrCompletion)
	for _, row := range []struct {
		what string
		s    Sample
	}{
		{"hand loop: `SET done_at` if `attribute_not_exists(done_at)`", wc.Hand},
		{"Run, complete-only: status and done_at, if the item exists and has no status", wc.CompleteOnly},
		{"Run, claim: status, owner, slot, token, scope, claim_until, attempt count", wc.Claim},
		{"Run, completion: status and done_at, fenced on status, owner, slot, token, attempt count", wc.Completion},
		{"**Run, claim + completion**", claimPair},
		{"what-if, claim + completion with one claim attribute", oneAttrPair},
	} {
		w("| %s | %s | %s |\n", row.what, row.s.Fmt(0, ""), Ratio(wc.Hand, row.s).X())
	}
	w("\n**Each pass as a whole**: Run (complete-only) and the hand loop at concurrency 1 on a fresh table of %s items each, "+
		"every item write timed at the client: the start (to the first item write: Run's plan, lease, markers and first scans; the loop's scan), "+
		"the item writes, the client's own work between one write's answer and the next write (Run's pipeline: hand-off, handler, counters; "+
		"the loop's channel), and the end (after the last write's answer: Run's checkpoint, stealing check and lease release).\n\n",
		num(float64(wc.TimelineItems), 0))
	w("| at concurrency 1 | hand loop | Run, complete-only | Run against the hand loop |\n|---|---|---|---|\n")
	for _, row := range []struct {
		what      string
		loop, run Sample
		prec      int
	}{
		{"start to the first item write, ms", wc.Loop.Start, wc.Run.Start, 1},
		{"item write, µs (mean)", wc.Loop.Write, wc.Run.Write, 0},
		{"client's work between two writes, µs (mean)", wc.Loop.Gap, wc.Run.Gap, 0},
		{"last write's answer to the return, ms", wc.Loop.End, wc.Run.End, 1},
	} {
		w("| %s | %s | %s | %s more |\n", row.what, row.loop.Fmt(row.prec, ""), row.run.Fmt(row.prec, ""), diff(row.run, row.loop).Fmt(row.prec, ""))
	}
	w("| items/s | %s | %s | %s |\n", wc.Loop.ItemsPerSec.Fmt(0, ""), wc.Run.ItemsPerSec.Fmt(0, ""), Ratio(wc.Run.ItemsPerSec, wc.Loop.ItemsPerSec).X())
	w("\n%s\n\n", r.writeCostSplit())
}

// writeCostSplit divides the time Run took beyond the hand loop in the timelines (medians) into
// its parts.
func (r *Results) writeCostSplit() string {
	wc := r.WriteCost
	n := float64(wc.TimelineItems)
	loopMS, runMS := 1000*n/wc.Loop.ItemsPerSec.Median(), 1000*n/wc.Run.ItemsPerSec.Median()
	start := wc.Run.Start.Median() - wc.Loop.Start.Median()
	writes := n * (wc.Run.Write.Median() - wc.Loop.Write.Median()) / 1000
	gaps := n * (wc.Run.Gap.Median() - wc.Loop.Gap.Median()) / 1000
	end := wc.Run.End.Median() - wc.Loop.End.Median()
	return fmt.Sprintf("Of the %s ms Run took beyond the hand loop's %s ms (medians), the start accounts for %.0f ms, the item writes for %.0f ms, "+
		"the client's work between writes for %.0f ms and the end for %.0f ms. What one write costs alone is in the first table; inside Run "+
		"an item write also shares DynamoDB Local and this machine's 2 cores with Run's scans of the table's 64 segments and their unit markers, "+
		"sent while it writes, where the hand loop's 4 scans are over after its first items.",
		num(runMS-loopMS, 0), num(loopMS, 0), start, writes, gaps, end)
}
