package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dynapart/dynapart/lock"
)

// Latency is the throughput matrix at a real endpoint's latency: every request passes a loopback
// proxy that holds it for a fixed delay before forwarding it to DynamoDB Local.
type Latency struct {
	Delays []time.Duration
	Items  int
	Points []*LatencyPoint
}

// LatencyPoint is one variant at one concurrency and delay.
type LatencyPoint struct {
	Variant     string
	Delay       time.Duration
	Concurrency int
	ItemsPerSec Sample
}

// Point returns the point of variant at conc and delay, or nil.
func (l *Latency) Point(variant string, conc int, delay time.Duration) *LatencyPoint {
	for _, p := range l.Points {
		if p.Variant == variant && p.Concurrency == conc && p.Delay == delay {
			return p
		}
	}
	return nil
}

// MeasureLatency runs the hand loop and the library variants at every concurrency and delay,
// reps times interleaved, each on a fresh table of ItemsAt(items, concurrency) items (seeded
// directly, not through the proxy).
func (e *Env) MeasureLatency(ctx context.Context, items int, concs []int, delays []time.Duration, reps int) (*Latency, error) {
	l := &Latency{Delays: delays, Items: items}
	envs := make([]*Env, len(delays))
	for i, d := range delays {
		pe, p, err := e.viaProxy(d)
		if err != nil {
			return nil, err
		}
		defer p.close()
		envs[i] = pe
		for _, c := range concs {
			for _, v := range libVariants {
				l.Points = append(l.Points, &LatencyPoint{Variant: v, Delay: d, Concurrency: c})
			}
		}
	}
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	for rep := range reps {
		for _, p := range l.Points {
			pe := envs[indexOf(delays, p.Delay)]
			rate, err := e.latencyOnce(ctx, pe, leases, p.Variant, ItemsAt(items, p.Concurrency), p.Concurrency)
			if err != nil {
				return nil, fmt.Errorf("%s at concurrency %d, delay %s: %w", p.Variant, p.Concurrency, p.Delay, err)
			}
			p.ItemsPerSec = append(p.ItemsPerSec, rate)
			e.logf("latency rep %d/%d: delay %4s %-20s concurrency %2d: %6.0f items/s", rep+1, reps, p.Delay, p.Variant, p.Concurrency, rate)
		}
	}
	return l, nil
}

// latencyOnce seeds a table through e (no delay) and runs variant through pe (the proxy).
func (e *Env) latencyOnce(ctx context.Context, pe *Env, leases, variant string, n, conc int) (float64, error) {
	table, err := e.freshTable(ctx, "lat", n)
	if err != nil {
		return 0, err
	}
	defer e.dropTable(table)
	rate, _, err := pe.runVariant(ctx, table, leases, variant, n, conc)
	return rate, err
}

func indexOf[T comparable](list []T, v T) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}

func (r *Results) latencySection(w writer) {
	w("## At a real endpoint's latency\n\n")
	l := r.Latency
	if l == nil {
		pending(w, ScenarioLatency, r.Errors[ScenarioLatency])
		return
	}
	w("Every request passes a loopback HTTP proxy that holds it for a fixed delay before forwarding it to DynamoDB Local "+
		"(a stand-in for the round trip to DynamoDB in a region); at 0 ms the same proxy only forwards. "+
		"A fresh table per cell, %s items at c = 64, %s at c = 16, %s at c = 4, %s at c = 1; items/s, and the ratio to the hand loop at the same delay and concurrency in the same repetition.\n\n",
		num(float64(ItemsAt(l.Items, 64)), 0), num(float64(ItemsAt(l.Items, 16)), 0), num(float64(ItemsAt(l.Items, 4)), 0), num(float64(ItemsAt(l.Items, 1)), 0))
	w("| delay | concurrency | hand loop items/s | %s | batched ÷ claim+complete |\n|---|---|---|%s---|\n",
		strings.Join(libVariants[1:], " | "), strings.Repeat("---|", len(libVariants)-1))
	for _, d := range l.Delays {
		for _, c := range r.Options.Concurrencies {
			base := l.Point(VariantPlain, c, d)
			if base == nil {
				continue
			}
			row := []string{fmt.Sprintf("%d ms", d.Milliseconds()), fmt.Sprint(c), base.ItemsPerSec.Fmt(0, "")}
			for _, v := range libVariants[1:] {
				p := l.Point(v, c, d)
				row = append(row, Ratio(p.ItemsPerSec, base.ItemsPerSec).X()+"<br>"+p.ItemsPerSec.Fmt(0, "/s"))
			}
			row = append(row, Ratio(l.Point(VariantBatched, c, d).ItemsPerSec, l.Point(VariantClaim, c, d).ItemsPerSec).X())
			w("| %s |\n", strings.Join(row, " | "))
		}
	}
	w("\n%s\n\n", latencyNotes)
}

// latencyNotes explains the latency table's batched rows.
const latencyNotes = "Batched claims send one transaction per up to 25 claims and one per up to 25 completions, where the hand loop sends a request per item, " +
	"so with few handlers the round trip, not the server, bounds the hand loop and batched claims pass it (since f48f01f the claim gate runs up to max(c, 50) claims ahead " +
	"of fast handlers and up to max(c, 25) handled items wait for a batched completion; before, both were c, and at c = 4 a transaction carried a few items). " +
	"Once the hand loop reaches DynamoDB Local's ceiling (see its section: transaction items cost it what single UpdateItems do), batched claims can reach at most half " +
	"its rate, because they write every item twice (claim and completion), and single claims make the same two writes: neither >= 1.0x the hand loop nor >= 2x " +
	"single claims can hold there on this server. Real DynamoDB bills a transaction item 2 WCU; its per-partition limits, not a single process, set the ceiling."

// latencyGoals are the summary rows of the latency scenario at its largest delay.
func (r *Results) latencyGoals() []Goal {
	l := r.Latency
	if l == nil || len(l.Delays) == 0 {
		return nil
	}
	d := l.Delays[len(l.Delays)-1]
	rows := []struct {
		name, target  string
		variant, base string
		ok            func(float64) bool
	}{
		{"complete-only vs hand loop", ">= 0.9x", VariantCompleteOnly, VariantPlain, atLeast(0.9)},
		{"batched claims vs hand loop", ">= 1.0x", VariantBatched, VariantPlain, atLeast(1.0)},
		{"batched claims vs single claims", ">= 2x", VariantBatched, VariantClaim, atLeast(2.0)},
	}
	var gs []Goal
	for _, row := range rows {
		cell, all := goalCells(r.Options.Concurrencies, func(c int) (Sample, bool) {
			p, base := l.Point(row.variant, c, d), l.Point(row.base, c, d)
			if p == nil || base == nil {
				return nil, false
			}
			return Ratio(p.ItemsPerSec, base.ItemsPerSec), true
		}, row.ok)
		gs = append(gs, Goal{fmt.Sprintf("%s at %d ms per request", row.name, d.Milliseconds()), row.target, cell, verdict(all)})
	}
	return gs
}
