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

// SmallCombos are the combinations the small sweep walks at every k: the claim path of each
// ledger and claim mode, under the outcomes that exercise retries and dead letters.
func SmallCombos() []Combo {
	return []Combo{
		{Ledger: "inline", Claims: ClaimSingle, Mode: "segment", Outcome: OutcomeFailOnce, Workers: 1},
		{Ledger: "table", Claims: ClaimBatch, Mode: "filter", Outcome: OutcomePermanent, Workers: 1},
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
