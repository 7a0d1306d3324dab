package worker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// TestResizeHelper: Resize refuses a slot count the group's segments cannot give (a *ConfigError
// on Workers, nothing written) and a group that does not exist; it records the segment count of a
// group made before counts were recorded in the resize's own write, so workers keep the layout.
func TestResizeHelper(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = Resize(ctx, locks, "nobody", 3)
	require.ErrorIs(t, err, lock.ErrGroupNotFound)

	// An old group: meta without "segments" (2 slots x 4 sub-segments = 8 segments).
	old := map[string]string{"mode": "segment", "sub_segments": "4", "job": "default", "ledger": "inline", "table": f.table}
	l, err := locks.AcquireSlot(ctx, "old", 2, lock.WithGroupMeta(old))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	_, err = Resize(ctx, locks, "old", 9)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Workers", ce.Field)
	st, err := locks.GroupState(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, 2, st.N, "nothing written")
	require.Zero(t, st.Epoch)

	res, err := Resize(ctx, locks, "old", 6)
	require.NoError(t, err)
	require.Equal(t, lock.Resize{OldN: 2, NewN: 6, Epoch: 1, Changed: true}, res)
	st, err = locks.GroupState(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, "8", st.Meta["segments"], "the old layout's count is recorded")
	n, unit := GroupUnits(st)
	require.Equal(t, 8, n)
	require.Equal(t, "segments", unit)

	_, err = Resize(ctx, locks, "old", 0)
	require.ErrorAs(t, err, &ce)
}
