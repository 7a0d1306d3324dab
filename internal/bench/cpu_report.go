package bench

import (
	"fmt"
	"strings"
)

// cpuBusy is the share of the machine's CPUs the two processes kept busy, per repetition.
func (c *CPUShare) cpuBusy(p *CPUPoint) Sample {
	both := sum(p.ClientUS, p.ServerUS)
	busy := make(Sample, 0, len(both))
	for i := range min(len(both), len(p.ItemsPerSec)) {
		busy = append(busy, both[i]*p.ItemsPerSec[i]/1e6/float64(c.CPUs))
	}
	return busy
}

func (r *Results) cpuGoals() []Goal {
	c := r.CPU
	if c == nil {
		return nil
	}
	base, co := c.Point(VariantPlain), c.Point(VariantCompleteOnly)
	if base == nil || co == nil {
		return nil
	}
	m := "client " + diff(co.ClientUS, base.ClientUS).Fmt(0, " µs")
	if len(co.ServerUS) > 0 {
		m += "; DynamoDB Local " + diff(co.ServerUS, base.ServerUS).Fmt(0, " µs")
	}
	return []Goal{{fmt.Sprintf("CPU per item, Run complete-only minus the hand loop, c=%d", c.Concurrency),
		"reported (where the rest of the time goes)", m, "–"}}
}

func (r *Results) cpuSection(w writer) {
	w("## Where the CPU goes at concurrency %d\n\n", cpuConcurrency(r.CPU))
	c := r.CPU
	if c == nil {
		pending(w, ScenarioCPU, r.Errors[ScenarioCPU])
		return
	}
	w("Measured in this run: the hand loop, Run complete-only and Run claim+complete (the library, in the benchmark's own process) "+
		"on fresh tables of %s items at concurrency %d, interleaved; around each pass, the CPU time (user + system) of the benchmark's "+
		"process, the client (getrusage), and of DynamoDB Local's Java process (/proc/PID/stat), each divided by the items; the client's "+
		"heap allocations and garbage collections (runtime.MemStats). Both processes share the machine's %d CPUs, so while they keep them "+
		"busy a pass's items/s is at most %d ÷ (client + DynamoDB Local CPU per item): the hand loop's CPU per item ÷ a variant's is "+
		"the ratio CPU alone predicts.\n\n", num(float64(c.Items), 0), c.Concurrency, c.CPUs, c.CPUs)
	server := len(c.Points) > 0 && len(c.Points[0].ServerUS) > 0
	if !server {
		w("DynamoDB Local's process was not found (an endpoint on another machine?): only the client's CPU is shown.\n\n")
	}
	w("| | items/s | ÷ hand loop | client CPU, µs/item | DynamoDB Local CPU, µs/item | both, µs/item | hand loop's CPU ÷ it | CPUs busy | allocations/item | GCs per 1,000 items |\n")
	w("|---|---|---|---|---|---|---|---|---|---|\n")
	base := c.Point(VariantPlain)
	for _, p := range c.Points {
		row := []string{p.Variant, p.ItemsPerSec.Fmt(0, ""), Ratio(p.ItemsPerSec, base.ItemsPerSec).X(), p.ClientUS.Fmt(0, "")}
		if server {
			both := sum(p.ClientUS, p.ServerUS)
			row = append(row, p.ServerUS.Fmt(0, ""), both.Fmt(0, ""), Ratio(sum(base.ClientUS, base.ServerUS), both).X(),
				pct(c.cpuBusy(p)))
		} else {
			row = append(row, "–", "–", "–", "–")
		}
		row = append(row, p.Allocs.Fmt(0, ""), p.GCPer1000.Fmt(1, ""))
		w("| %s |\n", strings.Join(row, " | "))
	}
	w("\n")
	co := c.Point(VariantCompleteOnly)
	if co == nil || base == nil {
		return
	}
	client := diff(co.ClientUS, base.ClientUS)
	w("Run complete-only spent %s µs more client CPU per item than the hand loop (%s more than the loop's), with %s more allocations per item and %s "+
		"garbage collections per 1,000 items against %s",
		client.Fmt(0, ""), pct(Ratio(client, base.ClientUS)),
		diff(co.Allocs, base.Allocs).Fmt(0, ""), co.GCPer1000.Fmt(1, ""), base.GCPer1000.Fmt(1, ""))
	if server {
		srv := diff(co.ServerUS, base.ServerUS)
		w(", and DynamoDB Local spent %s µs more per item on Run's requests than on the loop's (%s more). Where both processes keep the CPUs busy "+
			"(the column above), the ratio is the CPU ratio, not a wait in Run", srv.Fmt(0, ""), pct(Ratio(srv, base.ServerUS)))
	}
	w(".\n\n")
}

func cpuConcurrency(c *CPUShare) int {
	if c == nil {
		return 16
	}
	return c.Concurrency
}

// pct formats a share as a percentage: median (min–max).
func pct(s Sample) string {
	p := make(Sample, len(s))
	for i, v := range s {
		p[i] = 100 * v
	}
	return p.Fmt(0, "%")
}
