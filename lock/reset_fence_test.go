package lock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/clock"
)

// A holder paused across a ResetGroup (its clock stood still, so its lease context is still live)
// must not be able to mark the slot finished again or restore an old cursor: the reset
// invalidates every earlier token.
func TestResetGroupFencesAPausedHolder(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	holderClk, resetClk := clock.NewFake(t0), clock.NewFake(t0)
	holder, _ := newClient(t, db, table, WithClock(holderClk), WithOwner("paused"))
	resetter, _ := newClient(t, db, table, WithClock(resetClk), WithOwner("admin"))

	l, err := holder.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	require.NoError(t, l.SaveCheckpoint(ctx, "old-cursor"))
	require.NoError(t, l.MarkFinished(ctx))

	// The holder pauses; by everyone else's clock its lease has long expired.
	resetClk.Advance(time.Hour)
	require.NoError(t, resetter.ResetGroup(ctx, "g"))
	before := rawItem(t, db, table, groupPK("g"), 0)
	require.Nil(t, l.Err(), "the paused holder's own clock has not moved")

	require.ErrorIs(t, l.SaveCheckpoint(ctx, "old-cursor"), ErrLeaseLost)
	require.ErrorIs(t, l.MarkFinished(ctx), ErrLeaseLost)
	require.Equal(t, before, rawItem(t, db, table, groupPK("g"), 0), "the reset slot is unchanged")

	// The next holder starts afresh and gets a larger token.
	next, err := resetter.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	require.Empty(t, next.Checkpoint())
	require.Greater(t, next.Token(), l.Token())
	release(t, next)
	require.ErrorIs(t, l.Release(ctx), ErrLeaseLost)
}

// A Lease whose context is done writes nothing: no request is sent, whatever the item says; nor
// does it write unit markers or plan starts.
func TestLeaseWithDoneContextWritesNothing(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	fdb := newFaultyDB(db)
	c, ev := newClient(t, fdb, table, WithClock(clk), WithOwner("a"))

	l, err := c.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	require.NoError(t, l.SaveCheckpoint(ctx, "cursor-1"))
	p := UnitPass{Group: "g", Slot: 0, Pass: 1, Run: l.Token()}
	_, m, err := l.MarkUnit(ctx, p, 0)
	require.NoError(t, err)
	// The holder's clock passes the local expiry: the lease context ends, though nobody took the
	// slot (its item still names this owner and token).
	clk.Advance(time.Hour)
	waitDone(t, l, "the local expiry")
	select {
	case <-ev.renewed:
	default:
	}
	before := rawItem(t, db, table, groupPK("g"), 0)
	calls := fdb.calls.Load()

	require.ErrorIs(t, l.SaveCheckpoint(ctx, "cursor-2"), ErrLeaseLost)
	require.ErrorIs(t, l.MarkFinished(ctx), ErrLeaseLost)
	_, _, err = l.MarkUnit(ctx, p, 1)
	require.ErrorIs(t, err, ErrLeaseLost)
	_, err = l.TakeOverUnit(ctx, p, m)
	require.ErrorIs(t, err, ErrLeaseLost)
	require.ErrorIs(t, l.SaveUnitCursor(ctx, p, 0, "c"), ErrLeaseLost)
	require.ErrorIs(t, l.FinishUnit(ctx, p, 0, UnitEnd{}), ErrLeaseLost)
	_, err = l.StorePlanStart(ctx, PlanStart{Pass: 1})
	require.ErrorIs(t, err, ErrLeaseLost)
	require.Equal(t, calls, fdb.calls.Load(), "no request after the lease ended")
	require.Equal(t, before, rawItem(t, db, table, groupPK("g"), 0))
}
