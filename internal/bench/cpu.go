package bench

import (
	"context"
	"fmt"
	"runtime"

	"github.com/dynapart/dynapart/lock"
)

// cpuVariants are the variants whose CPU is measured: the library ones, which run in this process,
// so this process's CPU time is the client's.
var cpuVariants = []string{VariantPlain, VariantCompleteOnly, VariantClaim}

// CPUPoint is what one variant cost in CPU, per item, over the repetitions.
type CPUPoint struct {
	Variant     string
	ItemsPerSec Sample
	ClientUS    Sample // this process's CPU time (user + system) per item, µs
	ServerUS    Sample // DynamoDB Local's CPU time per item, µs (empty when its process was not found)
	Allocs      Sample // heap allocations per item in this process
	GCPer1000   Sample // garbage collections of this process per 1,000 items
}

// CPUShare is where the CPU goes when Run and the hand loop share the machine with DynamoDB
// Local: both processes' CPU time per item, measured around each pass.
type CPUShare struct {
	Items, Concurrency int
	ServerPID          int // 0: not found, ServerUS is empty
	CPUs               int
	Points             []*CPUPoint
}

// Point returns variant's point, or nil.
func (c *CPUShare) Point(variant string) *CPUPoint {
	for _, p := range c.Points {
		if p.Variant == variant {
			return p
		}
	}
	return nil
}

// MeasureCPU runs the hand loop, Run complete-only and Run claim+complete over fresh tables of n
// items at conc, interleaved, and reads the CPU time this process (the client) and DynamoDB Local's
// process used during each pass. DynamoDB Local's process is e.ServerPID, or the one listening on
// the endpoint's port.
func (e *Env) MeasureCPU(ctx context.Context, n, conc, reps int) (*CPUShare, error) {
	out := &CPUShare{Items: n, Concurrency: conc, ServerPID: e.serverPID(), CPUs: runtime.NumCPU()}
	for _, v := range cpuVariants {
		out.Points = append(out.Points, &CPUPoint{Variant: v})
	}
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	for rep := range reps {
		for _, p := range out.Points {
			if err := e.cpuOnce(ctx, out, p, leases, rep, reps); err != nil {
				return nil, fmt.Errorf("%s: %w", p.Variant, err)
			}
		}
	}
	return out, nil
}

// cpuOnce measures one pass of p's variant on a fresh table.
func (e *Env) cpuOnce(ctx context.Context, c *CPUShare, p *CPUPoint, leases string, rep, reps int) error {
	table, err := e.freshTable(ctx, "cpu", c.Items)
	if err != nil {
		return err
	}
	defer e.dropTable(table)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	meter := startCPU(c.ServerPID)
	rate, _, err := e.runVariant(ctx, table, leases, p.Variant, c.Items, c.Concurrency)
	if err != nil {
		return err
	}
	client, server, serverRead := meter.perItem(c.Items)
	runtime.ReadMemStats(&m1)
	items := float64(c.Items)
	p.ItemsPerSec = append(p.ItemsPerSec, rate)
	p.ClientUS = append(p.ClientUS, client)
	p.Allocs = append(p.Allocs, float64(m1.Mallocs-m0.Mallocs)/items)
	p.GCPer1000 = append(p.GCPer1000, float64(m1.NumGC-m0.NumGC)*1000/items)
	line := fmt.Sprintf("cpu rep %d/%d: %-20s %6.0f items/s, client %4.0f µs/item", rep+1, reps, p.Variant, rate, client)
	if serverRead {
		p.ServerUS = append(p.ServerUS, server)
		line += fmt.Sprintf(", DynamoDB Local %4.0f µs/item", server)
	}
	e.logf("%s", line)
	return nil
}
