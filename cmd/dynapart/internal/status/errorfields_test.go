package status

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorFieldsAlwaysThere: the JSON's error fields are there when empty too (README: the JSON
// adds fields and never removes one, and lists ledger's error). They were omitted when empty, so
// a script reading doc.ledger.error met a field that came and went (helper-83).
func TestErrorFieldsAlwaysThere(t *testing.T) {
	b, err := json.Marshal(Document{Ledger: &ledgerState{}, Stream: &streamDoc{Shards: []shardDoc{{Shard: "s"}}}})
	require.NoError(t, err)
	var doc struct {
		Error  *string `json:"error"`
		Ledger struct {
			Error *string `json:"error"`
		} `json:"ledger"`
		Stream struct {
			Error  *string `json:"error"`
			Shards []struct {
				Error *string `json:"error"`
			} `json:"shards"`
		} `json:"stream"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	for name, f := range map[string]*string{"error": doc.Error, "ledger.error": doc.Ledger.Error,
		"stream.error": doc.Stream.Error, "stream.shards[0].error": doc.Stream.Shards[0].Error} {
		require.NotNil(t, f, "%s is in the JSON when empty", name)
	}
}
