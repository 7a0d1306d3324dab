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
