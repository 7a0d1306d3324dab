package sweep

import (
	"context"
	"time"

	"github.com/dynapart/dynapart/ddbfault"
)

// Plan says which cases a sweep runs.
type Plan struct {
	// Combos are the combinations. Defaults to Combos().
	Combos []Combo
	// Kinds are the fault kinds. Defaults to ddbfault.Kinds().
	Kinds []ddbfault.Kind
	// Stride: each kind runs every Stride-th k, kind i starting at k = 1 + i mod Stride, so with
	// Stride = len(Kinds) every k of a combination meets exactly one kind. Defaults to 1 (every
	// kind at every k).
	Stride int
	// Extra calls beyond the baseline's K are swept too (a run may make a few more calls than
	// its baseline). Defaults to 0.
	Extra int64
	// PerCombo, when above 0, replaces the stride: each combination gets its baseline and
	// PerCombo faulted runs (see Sampled), drawn with Seed. Defaults to 0 (the stride sweep).
	PerCombo int
	// Seed draws PerCombo's cases; the report prints it, so a sample replays.
	Seed uint64
}

// Summary counts a sweep.
type Summary struct {
	Combos, Runs, Injected, Broken, Violations int
	RunErrors                                  int                   // runs whose Run returned an error (not a violation by itself)
	ByKind                                     map[ddbfault.Kind]int // faulted runs per kind
	Failures                                   []*Result
	Wall                                       time.Duration
	Plan                                       Plan
}

// cases are the faulted runs of combination ci (of p.Combos), whose baseline made calls calls.
func (p Plan) cases(ci int, c Combo, calls int64) []Case {
	if p.PerCombo > 0 {
		return Sampled(c, ci, p.Kinds, calls, p.PerCombo, p.Seed)
	}
	var out []Case
	for i, kind := range p.Kinds {
		out = append(out, EveryK(c, kind, calls, p.Stride, i)...)
	}
	return out
}

// Sweep runs the plan: a fault-free baseline per combination, then its cases. progress, if not
// nil, sees every result.
func (f *Fixture) Sweep(ctx context.Context, p Plan, progress func(*Result)) *Summary {
	if p.Combos == nil {
		p.Combos = Combos()
	}
	if p.Kinds == nil {
		p.Kinds = ddbfault.Kinds()
	}
	p.Stride = max(p.Stride, 1)
	start := time.Now()
	s := &Summary{Plan: p, ByKind: map[ddbfault.Kind]int{}}
	run := context.WithoutCancel(ctx) // ctx ends the sweep between runs, never a run midway
	add := func(r *Result) {
		s.Runs++
		if r.Injected != nil {
			s.Injected++
		}
		if r.Case.Fault.At > 0 {
			s.ByKind[r.Case.Fault.Kind]++
		}
		if r.RunErr != nil {
			s.RunErrors++
		}
		if !r.OK() {
			s.Broken++
			s.Violations += len(r.Violations)
			s.Failures = append(s.Failures, r)
		}
		if progress != nil {
			progress(r)
		}
	}
	for ci, c := range p.Combos {
		if ctx.Err() != nil {
			break
		}
		s.Combos++
		base := f.Baseline(run, c)
		add(base)
		for _, cs := range p.cases(ci, c, base.Calls+p.Extra) {
			if ctx.Err() != nil {
				break
			}
			add(f.Run(run, cs))
		}
	}
	s.Wall = time.Since(start)
	return s
}
