package work

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ledger"
)

// TestParseEffects: the --exec-effects output becomes the item's changes and the writes; output
// that is not such an object is refused with an error that says where.
func TestParseEffects(t *testing.T) {
	e, err := parseEffects([]byte(`{"set": {"first": "Ada", "tags": ["a", 1, null], "meta": {"ok": true}}, "add": {"n": 2},
		"remove": ["name"], "writes": [
		{"put": {"table": "T", "item": {"pk": "x", "v": 1.5}, "if_absent": true}},
		{"update": {"table": "C", "key": {"pk": "total"}, "add": {"n": 1}}},
		{"delete": {"table": "T", "key": {"pk": "old"}}}]}`))
	require.NoError(t, err)
	require.Len(t, e.ItemChanges(), 5)
	ws := e.Writes()
	require.Len(t, ws, 3)
	require.Equal(t, ledger.WritePut, ws[0].Kind)
	require.True(t, ws[0].IfAbsent)
	require.Equal(t, &types.AttributeValueMemberN{Value: "1.5"}, ws[0].Item["v"])
	require.Equal(t, ledger.WriteUpdate, ws[1].Kind)
	require.Equal(t, ledger.WriteDelete, ws[2].Kind)

	for _, empty := range []string{"", " \n", "{}"} {
		e, err := parseEffects([]byte(empty))
		require.NoError(t, err, "%q", empty)
		require.True(t, e.Empty(), "%q", empty)
	}
	for out, where := range map[string]string{
		`not json`:              "not an effects object",
		`{"sett": {}}`:          "unknown field",
		`{} {}`:                 "more than one JSON value",
		`{"add": {"n": "one"}}`: "add.n: want a number",
		`{"writes": [{}]}`:      "writes[0]: want exactly one of put, update, delete",
		`{"writes": [{"put": {"item": {"pk": "x"}}}]}`:   "writes[0].put: no table",
		`{"writes": [{"update": {"table": "T"}}]}`:       "writes[0].update: no key",
		`{"writes": [{"delete": {"key": {"pk": "x"}}}]}`: "writes[0].delete: no table",
	} {
		_, err := parseEffects([]byte(out))
		require.Error(t, err, out)
		require.True(t, strings.Contains(err.Error(), where), "%q: %v", out, err)
	}
}
