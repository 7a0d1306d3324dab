package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// A worker refused by its group exits 2 with the flag named.
func TestGroupMismatchNamesTheFlag(t *testing.T) {
	for field, flag := range map[string]string{
		"n": "--workers", "meta.attr_prefix": "--attr-prefix", "meta.ledger_table": "--ledger-table",
		"meta.complete_only": "--complete-only", "meta.index_name": "--index-name", "meta.shard_attr": "--shard-attr",
	} {
		gm := &lock.GroupMismatchError{Group: "g", Field: field, Have: "a", Want: "b"}
		err := explainMismatch(fmt.Errorf("dynapart: %w", gm))
		var me *groupMismatchError
		require.ErrorAs(t, err, &me)
		require.Equal(t, flag, me.Flag)
		require.ErrorIs(t, err, lock.ErrGroupMismatch)
		require.True(t, isUsage(err), "exit 2")
	}
}
