package lock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/clock"
)

// ReadGroup's read is the next round's first view: a start waits on one read of the group before
// its take, and the first holder of a new group learns the group from its own meta write.
func TestReadGroupFeedsTheFirstRound(t *testing.T) {
	ctx := context.Background()
	k := countedClient(t)
	f, a := k.f, k.a

	st, err := a.ReadGroup(ctx, "g")
	require.NoError(t, err)
	require.False(t, st.Exists)
	before := f.calls.Load()
	first, err := a.TryAcquireSlot(ctx, "g", 3)
	require.NoError(t, err)
	require.Equal(t, int64(2), f.calls.Load()-before, "a new group: the take and the meta write, no read")
	after, ok := first.GroupAfterTake()
	require.True(t, ok, "the acquisition wrote the meta item after its take")
	require.Equal(t, GroupState{Exists: true, N: 3, Meta: map[string]string{}}, after)

	for _, n := range []int{0, 3} { // a join, and a caller that gives n
		st, err = a.ReadGroup(ctx, "g")
		require.NoError(t, err)
		require.Equal(t, 3, st.N)
		before = f.calls.Load()
		l, err := a.TryAcquireSlot(ctx, "g", n)
		require.NoError(t, err)
		require.Equal(t, int64(1), f.calls.Load()-before, "n=%d: the take alone", n)
		require.NotEqual(t, first.Slot(), l.Slot())
		_, ok = l.GroupAfterTake()
		require.False(t, ok, "n=%d: the group existed; the holder reads it after the take", n)
		defer release(t, l)
	}

	before = f.calls.Load()
	_, err = a.TryAcquireSlot(ctx, "g", 3)
	require.ErrorIs(t, err, ErrNoFreeSlot)
	require.Equal(t, int64(1), f.calls.Load()-before, "the read is used once: the next round reads the group")
	release(t, first)
}

// A read older than a poll interval is not used.
func TestStaleReadGroupIsReadAgain(t *testing.T) {
	ctx := context.Background()
	k := countedClient(t)
	_, err := k.a.ReadGroup(ctx, "g")
	require.NoError(t, err)
	k.clk.Advance(poll + time.Millisecond)
	before := k.f.calls.Load()
	l, err := k.a.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	require.Equal(t, int64(3), k.f.calls.Load()-before, "a Query, the take and the meta write")
	release(t, l)
}

// What happened between ReadGroup and the round is settled by the conditional writes: a slot
// taken meanwhile is lost to its holder, a meta item created meanwhile is checked against ours
// (and the slot given back when they disagree), and the holder learns the group from it.
func TestReadGroupOvertaken(t *testing.T) {
	ctx := context.Background()
	k := countedClient(t)
	b, _ := newClient(t, k.db, k.table, timingOpts(k.clk, "b")...)

	_, err := k.a.ReadGroup(ctx, "one")
	require.NoError(t, err)
	held, err := b.TryAcquireSlot(ctx, "one", 1)
	require.NoError(t, err)
	_, err = k.a.TryAcquireSlot(ctx, "one", 1)
	require.ErrorIs(t, err, ErrNoFreeSlot, "the slot b took since the read")
	require.NoError(t, held.Context().Err(), "b still holds it")

	_, err = k.a.ReadGroup(ctx, "two")
	require.NoError(t, err)
	hb, err := b.TryAcquireSlot(ctx, "two", 2)
	require.NoError(t, err)
	la, err := k.a.TryAcquireSlot(ctx, "two", 2)
	require.NoError(t, err)
	require.NotEqual(t, hb.Slot(), la.Slot())
	st, ok := la.GroupAfterTake()
	require.True(t, ok, "a found b's meta item when it went to write its own")
	require.Equal(t, 2, st.N)

	_, err = k.a.ReadGroup(ctx, "three")
	require.NoError(t, err)
	hb3, err := b.TryAcquireSlot(ctx, "three", 2)
	require.NoError(t, err)
	_, err = k.a.TryAcquireSlot(ctx, "three", 3)
	var gm *GroupMismatchError
	require.ErrorAs(t, err, &gm)
	require.Equal(t, 1, heldSlots(t, b, "three"), "a gave the slot it took back")
	release(t, held, hb, la, hb3)
}

// A read that may be stale never decides against the caller: a join after a ReadGroup that found
// no group reads the group itself, and a view that disagrees with the caller's n is read again.
func TestReadGroupStaleDisagreement(t *testing.T) {
	ctx := context.Background()
	k := countedClient(t)
	b, _ := newClient(t, k.db, k.table, timingOpts(k.clk, "b")...)

	_, err := k.a.ReadGroup(ctx, "late")
	require.NoError(t, err)
	hb, err := b.TryAcquireSlot(ctx, "late", 2)
	require.NoError(t, err)
	la, err := k.a.TryAcquireSlot(ctx, "late", 0)
	require.NoError(t, err, "the group b created since the read is joined")
	require.NotEqual(t, hb.Slot(), la.Slot())

	hb8, err := b.TryAcquireSlot(ctx, "shrunk", 8)
	require.NoError(t, err)
	_, err = k.a.ReadGroup(ctx, "shrunk")
	require.NoError(t, err)
	r, err := b.ResizeGroup(ctx, "shrunk", 4)
	require.NoError(t, err)
	l4, err := k.a.TryAcquireSlot(ctx, "shrunk", 4)
	require.NoError(t, err, "n = 4 is the group's n since the resize")
	require.Equal(t, r.Epoch, l4.Epoch())
	release(t, hb, la, hb8, l4)
}

// A group larger than a window is read by windows as before: a join does not take its n or epoch
// from the read, so a resize since the read is seen.
func TestReadGroupOfAResizedLargeGroup(t *testing.T) {
	ctx := context.Background()
	k := countedClient(t)
	n := 2*windowSize + 2
	first, err := k.a.TryAcquireSlot(ctx, "g", n)
	require.NoError(t, err)
	_, err = k.a.ReadGroup(ctx, "g")
	require.NoError(t, err)
	b, _ := newClient(t, k.db, k.table, timingOpts(k.clk, "b")...)
	r, err := b.ResizeGroup(ctx, "g", n+5)
	require.NoError(t, err)
	l, err := k.a.TryAcquireSlot(ctx, "g", 0)
	require.NoError(t, err)
	require.Equal(t, r.Epoch, l.Epoch(), "taken under the plan of the resize")
	require.Less(t, l.Slot(), n+5)
	require.NotEqual(t, first.Slot(), l.Slot())
	release(t, first, l)
}

// A take of ours whose outcome was unknown and that lands after ReadGroup is adopted by the next
// round: the round reads the group instead of using the read, which may predate the landing.
func TestReadGroupWithAnUnsettledTake(t *testing.T) {
	ctx := context.Background()
	db, table := lockTable(t)
	clk := clock.NewFake(t0)
	late := newLateWrite(db)
	a, _ := newClient(t, late, table, timingOpts(clk, "a")...)
	late.arm()
	_, err := a.TryAcquireSlot(ctx, "u", 1)
	require.Error(t, err)
	require.Equal(t, 1, late.unsettled(a))
	_, err = a.ReadGroup(ctx, "u")
	require.NoError(t, err)
	require.NoError(t, late.deliver())
	l, err := a.TryAcquireSlot(ctx, "u", 1)
	require.NoError(t, err, "the landed take is adopted")
	require.Equal(t, 0, l.Slot())
	release(t, l)
}
