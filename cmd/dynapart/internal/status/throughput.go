package status

import (
	"slices"
	"time"
)

// throughputOf is the group's throughput at the last of samples: the counts now (the ledger's
// last read, when there is one, plus what the slots counted since), how far that is of the total,
// the rate over the last rateWindow, and the ETA.
func throughputOf(samples []sample, read *ledgerRead, doc *Document, every time.Duration) throughput {
	tp := throughput{Samples: slices.Clone(samples), IntervalSeconds: every.Seconds(),
		WindowSeconds: (pageSamples * every).Seconds()}
	if tp.Samples == nil {
		tp.Samples = []sample{}
	}
	tp.Rate, tp.RateWindow, tp.RateSource = rateOf(samples, doc.Progress)
	done, failed, known := countsNow(samples, read, doc.Progress != nil)
	if !known {
		return tp
	}
	tp.Done, tp.Failed = &done, &failed
	switch {
	case read != nil:
		total := read.items.Total
		tp.Total, tp.TotalSource = &total, "ledger"
	case doc.Progress != nil && doc.Progress.ItemsEstimate != nil:
		tp.Total, tp.TotalSource = doc.Progress.ItemsEstimate, "table_estimate"
	default:
		return tp
	}
	total := *tp.Total
	left := max(0, total-done-failed)
	if doc.Finished {
		left = 0 // every slot's share is read to the end
	}
	tp.Left = &left
	if total > 0 {
		f := min(1, float64(done)/float64(total))
		ff := min(1-f, float64(failed)/float64(total))
		tp.Fraction, tp.FailedFraction = &f, &ff
	}
	tp.ETASeconds = etaOf(left, tp.Rate, doc.Paused)
	if left > 0 && noWorker(doc) {
		tp.ETASeconds = nil // what the samples measured went with the last worker
	}
	return tp
}

// noWorker reports a group with slots left to read and none of them held by a live worker:
// nothing it has left moves, whatever the rate measured before.
func noWorker(doc *Document) bool {
	return doc.Progress != nil && doc.Progress.WorkingSlots == 0 && doc.Progress.FreeSlots > 0
}

// countsNow are the items done and failed now: the ledger's counts at its last read plus what the
// slots counted since (from the samples), else the slots' counts alone (known: slotsKnown).
func countsNow(samples []sample, read *ledgerRead, slotsKnown bool) (done, failed int64, known bool) {
	var last sample
	if n := len(samples); n > 0 {
		last = samples[n-1]
	}
	if read == nil {
		return last.Done, last.Failed, slotsKnown && len(samples) > 0
	}
	done = read.items.Done + max(0, last.Done-read.slotDone)
	failed = read.items.Failed + max(0, last.Failed-read.slotFailed)
	return done, failed, true
}

// rateOf is the rate at which items are done or failed over the samples of the last rateWindow;
// before two samples, the slots' read rate from their checkpoints.
func rateOf(samples []sample, g *groupProgress) (rate, window float64, source string) {
	if n := len(samples); n > 1 {
		last, first := samples[n-1], samples[n-1]
		for i := n - 1; i >= 0 && last.T-samples[i].T <= rateWindow.Milliseconds(); i-- {
			first = samples[i]
		}
		if dt := float64(last.T-first.T) / 1000; dt > 0 {
			return max(0, float64(last.Done+last.Failed-first.Done-first.Failed)/dt), dt, "samples"
		}
	}
	if g != nil {
		return g.Rate, 0, "checkpoints"
	}
	return 0, 0, ""
}

// etaOf is left at rate: 0 when nothing is left, nil when it cannot be told (no rate) or the
// group is paused (throughputOf: or no worker holds a slot).
func etaOf(left int64, rate float64, paused bool) *float64 {
	var eta float64
	switch {
	case left == 0:
	case paused || rate <= 0:
		return nil
	default:
		eta = float64(left) / rate
	}
	return &eta
}
