package sweep

import (
	"context"
	"math/rand/v2"

	"github.com/dynapart/dynapart/ddbfault"
)

// Baseline runs a combination fault-free and returns its result (Calls is K).
func (f *Fixture) Baseline(ctx context.Context, c Combo) *Result { return f.Run(ctx, Case{Combo: c}) }

// EveryK returns the cases of one combination and kind for k = 1..calls (calls from a baseline),
// stepping by stride from 1+offset (stride 1: every k).
func EveryK(c Combo, kind ddbfault.Kind, calls int64, stride, offset int) []Case {
	var out []Case
	stride = max(stride, 1)
	for k := int64(1 + offset%stride); k <= calls; k += int64(stride) {
		out = append(out, Case{Combo: c, Fault: ddbfault.Fault{Kind: kind, At: k}})
	}
	return out
}

// Sampled returns n faulted cases of combination ci (its index in the plan), whose baseline made
// calls calls: k is drawn (seeded) from each of n equal bands of 1..calls, so the faults spread
// over the whole run, and the kinds rotate through kinds from a seeded start, continuing where
// combination ci-1 left off, so every kind is used equally often over the combinations and
// consecutive combinations meet different kinds.
func Sampled(c Combo, ci int, kinds []ddbfault.Kind, calls int64, n int, seed uint64) []Case {
	if n <= 0 || calls <= 0 || len(kinds) == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, uint64(ci)))
	start := int(seed % uint64(len(kinds)))
	out := make([]Case, 0, n)
	for j := range n {
		lo := 1 + calls*int64(j)/int64(n)
		hi := calls * int64(j+1) / int64(n) // inclusive; a band may be empty when n > calls
		k := lo
		if hi > lo {
			k += r.Int64N(hi - lo + 1)
		}
		kind := kinds[(start+ci*n+j)%len(kinds)]
		out = append(out, Case{Combo: c, Fault: ddbfault.Fault{Kind: kind, At: k}})
	}
	return out
}

// SmallCombos are the combinations the small sweep walks at every k: the claim path of each
// ledger and claim mode, under the outcomes that exercise retries and dead letters.
func SmallCombos() []Combo {
	return []Combo{
		{Ledger: "inline", Claims: ClaimSingle, Mode: "segment", Outcome: OutcomeFailOnce, Workers: 1},
		{Ledger: "table", Claims: ClaimBatch, Mode: "filter", Outcome: OutcomePermanent, Workers: 1},
		{Ledger: "inline", Claims: CompleteOnly, Mode: "segment", Outcome: OutcomeEffects, Workers: 1},
	}
}

// SmallKinds are the kinds the small sweep uses at every k of SmallCombos()[i].
func SmallKinds(i int) ddbfault.Kind {
	return []ddbfault.Kind{ddbfault.LostAnswerRetried, ddbfault.ErrorBeforeSend}[i%2]
}

// Sample returns n cases drawn (seeded) from the full cross product of combinations, kinds and
// k in 1..maxK.
func Sample(seed uint64, n int, maxK int64) []Case {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	combos, kinds := Combos(), ddbfault.Kinds()
	out := make([]Case, n)
	for i := range out {
		out[i] = Case{Combo: combos[r.IntN(len(combos))],
			Fault: ddbfault.Fault{Kind: kinds[r.IntN(len(kinds))], At: 1 + r.Int64N(maxK)}}
	}
	return out
}
