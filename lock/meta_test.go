package lock

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A key missing on either side stands for its default; a key both sides record is reported before
// one only one side records.
func TestCheckMetaDefaultsAndOrder(t *testing.T) {
	defs := map[string]string{"attr_prefix": "dp_"}
	old := metaItem{exists: true, n: 2, meta: map[string]string{"ledger": "inline"}}
	want := func(meta map[string]string) target { return target{name: "g", n: 2, meta: meta, defs: defs} }

	require.NoError(t, checkMeta(want(map[string]string{"ledger": "inline", "attr_prefix": "dp_"}), old))
	err := checkMeta(want(map[string]string{"ledger": "inline", "attr_prefix": "x_"}), old)
	require.Equal(t, &GroupMismatchError{Group: "g", Field: "meta.attr_prefix", Have: "dp_", Want: "x_"}, err)

	// The group records attr_prefix (inline), the caller ledger_table (table ledger): the ledger
	// kind is what differs.
	inline := metaItem{exists: true, n: 2, meta: map[string]string{"ledger": "inline", "attr_prefix": "zz_"}}
	err = checkMeta(want(map[string]string{"ledger": "table", "ledger_table": "t"}), inline)
	require.Equal(t, &GroupMismatchError{Group: "g", Field: "meta.ledger", Have: "inline", Want: "table"}, err)
}
