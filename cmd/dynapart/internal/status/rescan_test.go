package status

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A slot whose holder rescans the whole table for records the stream lost says so, in the text
// and in the JSON document's rescanning flag; a slot that follows the stream or scans its share
// does not.
func TestStatusShowsARescan(t *testing.T) {
	rescan := "dp3|0.2|1|0|5.0.5.1000.1795000000000|rescan"
	require.True(t, rescansTable(rescan))
	require.False(t, followsStream(rescan))
	require.Equal(t, "pass 2, rescanning the whole table (the stream may have lost records)", positionSummary(rescan))
	for _, cp := range []string{"dp3|0.2|1|0|5.0.5.1000|follow", "dp3|0.2|0|0|0.0.0.0|{}", ""} {
		require.False(t, rescansTable(cp), cp)
	}
}
