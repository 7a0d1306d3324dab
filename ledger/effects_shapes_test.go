package ledger

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// resolved is c's update expression with every name and value placeholder replaced by what it
// stands for, so that two renderings compare whatever placeholders they chose.
func resolved(t *testing.T, c *clauses) string {
	t.Helper()
	return regexp.MustCompile(`[#:][A-Za-z0-9_]+`).ReplaceAllStringFunc(c.expr(), func(ph string) string {
		if ph[0] == '#' {
			n, ok := c.names[ph]
			require.True(t, ok, "name placeholder %s", ph)
			return "name(" + n + ")"
		}
		v, ok := c.values[ph]
		require.True(t, ok, "value placeholder %s", ph)
		return fmt.Sprintf("value(%#v)", v)
	})
}

// TestRenderChangesOnceMatchesTheBuilder: the update expression of a shape built once and filled
// with each call's values is the SDK builder's for those values, on the first call of a shape and
// on later ones, with equal values, odd names and every kind of change.
func TestRenderChangesOnceMatchesTheBuilder(t *testing.T) {
	lists := func(x string) [][]Change {
		return [][]Change{
			{Set("first", "Ada"+x), Set("last", "Lovelace"+x), Remove("name")},
			{Set("a", x), Set("b", x)}, // equal values
			{Add("count", 1), Add("tags", &types.AttributeValueMemberSS{Value: []string{x}}), Set("n.with.dots", 3), Remove("old")},
			{Remove("x"), Remove("y")},
			{Set("map", map[string]any{"k": x, "n": 2}), Set("list", []any{x, 1, true, nil})},
		}
	}
	for round, x := range []string{"1", "2", "2"} {
		for i, cs := range lists(x) {
			want, _, err := renderChanges(cs, nil)
			require.NoError(t, err)
			got, err := renderChangesOnce(cs)
			require.NoError(t, err)
			require.Equal(t, resolved(t, want), resolved(t, got), "round %d, list %d", round, i)
			require.Len(t, got.values, len(want.values))
		}
	}
}

// TestRenderChangesOnceSharesTheShape: calls of one shape share its rendered expression parts
// and names (read-only: nothing writes clauses), and each call has its own values.
func TestRenderChangesOnceSharesTheShape(t *testing.T) {
	first, err := renderChangesOnce([]Change{Set("p", "1"), Remove("q")})
	require.NoError(t, err)
	second, err := renderChangesOnce([]Change{Set("p", "2"), Remove("q")})
	require.NoError(t, err)
	require.Same(t, first.shape, second.shape)
	require.Equal(t, &first.set[0], &second.set[0], "the SET part is the shape's, not a copy")
	require.NotEqual(t, resolved(t, first), resolved(t, second))
	require.Contains(t, resolved(t, second), `Value:"2"`)
}
