package lock

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A join round of a group the client knows to fit one window reads the meta item and the slots
// in one Query (no GetItem first); a group that grew past a window meanwhile is still joined at
// its new n, under its new epoch.
func TestSmallGroupJoinReadsOnce(t *testing.T) {
	ctx := context.Background()
	k := countedClient(t)
	f, a := k.f, k.a
	first, err := a.TryAcquireSlot(ctx, "g", 3)
	require.NoError(t, err)

	before := f.calls.Load()
	l, err := a.TryAcquireSlot(ctx, "g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), f.calls.Load()-before, "a join of a known small group: one Query, one take")
	require.NotEqual(t, first.Slot(), l.Slot())
	release(t, first, l)

	r, err := a.ResizeGroup(ctx, "g", 3*windowSize)
	require.NoError(t, err)
	var leases []*Lease
	for range 2 { // the first round learns the group grew, the second reads a window as usual
		l, err := a.TryAcquireSlot(ctx, "g", 0)
		require.NoError(t, err)
		require.Equal(t, r.Epoch, l.Epoch(), "taken under the resized plan")
		require.Less(t, l.Slot(), 3*windowSize)
		leases = append(leases, l)
	}
	require.False(t, a.knownSmall(groupPK("g")), "the client read the resized meta item")
	release(t, leases...)
}
