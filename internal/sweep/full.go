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
}

// Summary counts a sweep.
type Summary struct {
	Combos, Runs, Injected, Broken, Violations int
	RunErrors                                  int // runs whose Run returned an error (not a violation by itself)
	Failures                                   []*Result
	Wall                                       time.Duration
	Plan                                       Plan
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
	s := &Summary{Plan: p}
	run := context.WithoutCancel(ctx) // ctx ends the sweep between runs, never a run midway
	add := func(r *Result) {
		s.Runs++
		if r.Injected != nil {
			s.Injected++
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
	for _, c := range p.Combos {
		if ctx.Err() != nil {
			break
		}
		s.Combos++
		base := f.Baseline(run, c)
		add(base)
		for i, kind := range p.Kinds {
			for _, cs := range EveryK(c, kind, base.Calls+p.Extra, p.Stride, i) {
				if ctx.Err() != nil {
					break
				}
				add(f.Run(run, cs))
			}
		}
	}
	s.Wall = time.Since(start)
	return s
}
