package lock

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// GroupsWithMeta finds the groups whose meta records a value under a key, by name, with their
// meta; slot items and other groups are left out, and a lease table that does not exist has none.
func TestGroupsWithMeta(t *testing.T) {
	ctx := context.Background()
	db, table := lockTable(t)
	c, _ := newClient(t, db, table)
	for group, src := range map[string]string{"users/b": "users", "users/a": "users", "orders/a": "orders"} {
		l, err := c.TryAcquireSlot(ctx, group, 2, WithGroupMeta(map[string]string{"table": src, "ledger": "inline"}))
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	got, err := GroupsWithMeta(ctx, db, table, "table", "users")
	require.NoError(t, err)
	require.Equal(t, []GroupMeta{
		{Name: "users/a", Meta: map[string]string{"table": "users", "ledger": "inline"}},
		{Name: "users/b", Meta: map[string]string{"table": "users", "ledger": "inline"}},
	}, got)
	got, err = GroupsWithMeta(ctx, db, table+"-missing", "table", "users")
	require.NoError(t, err)
	require.Empty(t, got)
}
