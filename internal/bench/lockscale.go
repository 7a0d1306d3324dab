package bench

import (
	"fmt"
	"strings"
)

// lockScaleNs are the sub-benchmarks of lock's fleet-scale benchmarks found in a run, by size.
func (r *Results) lockScaleNs(prefix string) []*GoBench {
	var out []*GoBench
	if r.LockScale == nil {
		return nil
	}
	for _, b := range r.LockScale.Benches {
		if strings.HasPrefix(b.Name, prefix+"/") {
			out = append(out, b)
		}
	}
	return out
}

func (r *Results) lockScaleSection(w writer) {
	w("## The lease table at fleet scale\n\n")
	if r.LockScale == nil {
		pending(w, ScenarioLockScale, r.Errors[ScenarioLockScale])
		return
	}
	w("`lock.BenchmarkStandbyPollRCU` (-benchtime 1x, -count %d): a group of N slots all held; a waiting standby (`AcquireSlot`) makes 20 polls after its first round, "+
		"with the read capacity DynamoDB Local reports for them (ConsumedCapacity), the calls and the items read per poll. "+
		"A group of more than 64 slots is read 64 slots at a time (one consistent Query on a sort-key range) plus the meta item (a GetItem): a poll costs the same whatever N is. "+
		"Only a standby's first round, and a round after one that lost the races for free slots, sweep window after window until one has a free slot "+
		"(once per AcquireSlot when nothing is free: the last column).\n\n", r.Options.Reps)
	w("| N slots | RCU per standby poll | calls per poll | items read per poll | items read by the first round |\n|---|---|---|---|---|\n")
	for _, b := range r.lockScaleNs("StandbyPollRCU") {
		w("| %s | %s | %s | %s | %s |\n", strings.TrimPrefix(b.Name, "StandbyPollRCU/n="), b.Metric("RCU/poll").Fmt(1, ""),
			b.Metric("calls/poll").Fmt(1, ""), b.Metric("items/poll").Fmt(0, ""), b.Metric("items-first-round").Fmt(0, ""))
	}
	w("\n`lock.BenchmarkFleetAcquire`: N lock clients start together on an empty group of N slots; the time until all N are held, " +
		"the calls each worker made until it won and the capacity the whole fleet consumed (lost races cost a WCU each).\n\n")
	w("| N workers = N slots | all held, ms | median calls/worker | max calls/worker | RCU, whole fleet | WCU, whole fleet |\n|---|---|---|---|---|---|\n")
	for _, b := range r.lockScaleNs("FleetAcquire") {
		w("| %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(b.Name, "FleetAcquire/n="), b.Metric("ms-all-held").Fmt(0, ""),
			b.Metric("median-calls/worker").Fmt(1, ""), b.Metric("max-calls/worker").Fmt(0, ""), b.Metric("RCU-total").Fmt(0, ""), b.Metric("WCU-total").Fmt(0, ""))
	}
	w("\n")
}

func (r *Results) lockScaleGoals() []Goal {
	bs := r.lockScaleNs("StandbyPollRCU")
	if len(bs) == 0 {
		return nil
	}
	var parts []string
	ok := true
	for _, b := range bs {
		ok = ok && b.Metric("items/poll").Max() <= 65
		parts = append(parts, fmt.Sprintf("%s: %s RCU, %s items", strings.TrimPrefix(b.Name, "StandbyPollRCU/"),
			b.Metric("RCU/poll").Fmt(1, ""), b.Metric("items/poll").Fmt(0, "")))
	}
	return []Goal{{"a standby's poll of a group of N slots, all held", "bounded whatever N: <= 65 items read (a 64-slot window + the meta item)",
		strings.Join(parts, "<br>"), verdict(ok)}}
}
