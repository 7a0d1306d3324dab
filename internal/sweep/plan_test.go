package sweep

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// TestCaseNamesRoundTrip: every name a report prints parses back to its case, so it replays.
func TestCaseNamesRoundTrip(t *testing.T) {
	for _, c := range append(Sample(1, 50, 40), Case{Combo: Combos()[7]}) {
		got, err := ParseCase(c.String())
		require.NoError(t, err)
		require.Equal(t, c.String(), got.String())
	}
	for _, bad := range []string{"", "inline.single", "inline.single.segment.succeed.wx", "inline.single.segment.succeed.w1/nope/k1",
		"inline.single.segment.succeed.w1/lost-answer/7"} {
		_, err := ParseCase(bad)
		require.Error(t, err, bad)
	}
}

// TestEveryKCoversEachKOnce: with the stride equal to the number of kinds, every k of a
// combination meets exactly one kind.
func TestEveryKCoversEachKOnce(t *testing.T) {
	kinds := ddbfault.Kinds()
	seen := map[int64]int{}
	for i, k := range kinds {
		for _, c := range EveryK(Combos()[0], k, 40, len(kinds), i) {
			seen[c.Fault.At]++
		}
	}
	require.Len(t, seen, 40)
	for k, n := range seen {
		require.Equal(t, 1, n, "k=%d", k)
	}
	require.Len(t, EveryK(Combos()[0], kinds[0], 40, 1, 0), 40)
}

func TestNormalizeGroupsLikeViolations(t *testing.T) {
	require.Equal(t, normalize(`it0003: Run returned nil, item is "retry" (attempts 1, handler calls 1)`),
		normalize(`it0011: Run returned nil, item is "retry" (attempts 2, handler calls 3)`))
}

// TestSampledSpreadsKindsAndK: a sampled plan gives each combination n cases, k in each of n
// bands of 1..calls, the kinds in rotation over the combinations (every kind equally often), and
// the same seed the same cases.
func TestSampledSpreadsKindsAndK(t *testing.T) {
	kinds := ddbfault.Kinds()
	combos := Combos()
	const n, calls = 4, 40
	perKind := map[ddbfault.Kind]int{}
	for ci, c := range combos {
		cs := Sampled(c, ci, kinds, calls, n, 42)
		require.Len(t, cs, n)
		for j, x := range cs {
			require.Equal(t, c, x.Combo)
			require.GreaterOrEqual(t, x.Fault.At, int64(1+calls*j/n), "case %d of combination %d", j, ci)
			require.LessOrEqual(t, x.Fault.At, int64(calls*(j+1)/n), "case %d of combination %d", j, ci)
			perKind[x.Fault.Kind]++
		}
		require.Equal(t, cs, Sampled(c, ci, kinds, calls, n, 42), "seeded")
	}
	require.Len(t, perKind, len(kinds))
	for k, m := range perKind {
		require.InDelta(t, len(combos)*n/len(kinds), m, 1, "kind %s", k)
	}
	require.NotEqual(t, Sampled(combos[0], 0, kinds, calls, n, 42), Sampled(combos[0], 0, kinds, calls, n, 43))
	require.Len(t, Sampled(combos[0], 0, kinds, 2, n, 1), n, "more cases than calls: k repeats, no case is lost")
	for _, x := range Sampled(combos[0], 0, kinds, 2, n, 1) {
		require.True(t, x.Fault.At >= 1 && x.Fault.At <= 2, "k=%d", x.Fault.At)
	}
}
