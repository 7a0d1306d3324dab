package lock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/clock"
)

// TestUnitMarkerItems pins the stored format of a unit marker (running groups read the markers
// older workers wrote) and what each call reads back from it.
func TestUnitMarkerItems(t *testing.T) {
	ctx := context.Background()
	h := twoHolders(t, "owner", "thief")
	db, table, owner, lo, lt := h.db, h.table, h.a, h.la, h.lb
	p := UnitPass{Group: "g", Epoch: 0, Slot: lo.Slot(), Pass: 2, Run: lo.Token()}
	pk := fmt.Sprintf("units#g#e0#s%d#p2.%d", lo.Slot(), lo.Token())

	taken, _, err := lt.MarkUnit(ctx, p, 7)
	require.NoError(t, err)
	require.True(t, taken)
	require.Equal(t, map[string]types.AttributeValue{
		"pk": avS(pk), "sk": avN(7), "owner": avS("thief"), "slot": avN(int64(lt.Slot())), "token": avN(lt.Token()),
		"done": avB(false),
	}, rawItem(t, db, table, pk, 7))

	taken, cur, err := lo.MarkUnit(ctx, p, 7)
	require.NoError(t, err)
	require.False(t, taken, "the unit has a marker")
	require.True(t, cur.HeldBy(lt))
	require.False(t, cur.HeldBy(lo))
	require.Equal(t, UnitMarker{Unit: 7, Owner: "thief", Slot: lt.Slot(), Token: lt.Token()}, cur)

	require.ErrorIs(t, lo.SaveUnitCursor(ctx, p, 7, "c0"), ErrUnitTakenOver, "only the marker's lease saves its cursor")
	require.NoError(t, lt.SaveUnitCursor(ctx, p, 7, "c1"))
	end := UnitEnd{Cursor: "c2", Dirty: true, Thief: UnitCounts{Done: 5, Failed: 1, Scanned: 9}}
	require.ErrorIs(t, lo.FinishUnit(ctx, p, 7, end), ErrUnitTakenOver)
	require.NoError(t, lt.FinishUnit(ctx, p, 7, end))
	require.Equal(t, map[string]types.AttributeValue{
		"pk": avS(pk), "sk": avN(7), "owner": avS("thief"), "slot": avN(int64(lt.Slot())), "token": avN(lt.Token()),
		"done": avB(true), "cursor": avS("c2"), "dirty": avB(true),
		"done_items": avN(5), "failed_items": avN(1), "scanned_items": avN(9),
	}, rawItem(t, db, table, pk, 7))

	taken, _, err = lo.MarkUnit(ctx, p, 1)
	require.NoError(t, err)
	require.True(t, taken)
	ms, err := owner.UnitMarkers(ctx, p)
	require.NoError(t, err)
	require.Equal(t, map[int]UnitMarker{
		1: {Unit: 1, Owner: "owner", Slot: lo.Slot(), Token: lo.Token()},
		7: {Unit: 7, Owner: "thief", Slot: lt.Slot(), Token: lt.Token(), Cursor: "c2", Done: true, Dirty: true,
			Thief: UnitCounts{Done: 5, Failed: 1, Scanned: 9}},
	}, ms)
	other, err := owner.UnitMarkers(ctx, UnitPass{Group: "g", Slot: lo.Slot(), Pass: 3, Run: lo.Token()})
	require.NoError(t, err)
	require.Empty(t, other, "another pass has markers of its own")
}

// TestUnitMarkerFencedByToken: a holder paused across a takeover of its slot (its own clock stood
// still, so its lease context is live) finds the units its successor took over closed to it: its
// cursor saves and finish are refused and change nothing, and it cannot take a unit back with
// the marker it read before.
func TestUnitMarkerFencedByToken(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	oldClk, newClk := clock.NewFake(t0), clock.NewFake(t0)
	old, _ := newClient(t, db, table, WithClock(oldClk), WithOwner("old"))
	next, _ := newClient(t, db, table, WithClock(newClk), WithOwner("next"))
	lOld, err := old.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	p := UnitPass{Group: "g", Slot: 0, Pass: 1, Run: lOld.Token()}
	taken, _, err := lOld.MarkUnit(ctx, p, 0)
	require.NoError(t, err)
	require.True(t, taken)
	require.NoError(t, lOld.SaveUnitCursor(ctx, p, 0, "old-1"))
	stale, err := old.UnitMarkers(ctx, p)
	require.NoError(t, err)

	newClk.Advance(time.Hour) // by everyone else's clock the old lease has long expired
	lNew, err := next.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	defer release(t, lNew)
	require.Greater(t, lNew.Token(), lOld.Token())
	taken, cur, err := lNew.MarkUnit(ctx, p, 0)
	require.NoError(t, err)
	require.False(t, taken)
	require.True(t, cur.HeldBy(lOld))
	took, err := lNew.TakeOverUnit(ctx, p, cur)
	require.NoError(t, err)
	require.True(t, took)
	pk := p.pk()
	before := rawItem(t, db, table, pk, 0)
	require.Equal(t, avS("old-1"), before["cursor"], "a takeover keeps the unit's cursor")
	require.Equal(t, avS("next"), before["owner"])

	require.Nil(t, lOld.Err(), "the paused holder's own clock has not moved")
	require.ErrorIs(t, lOld.SaveUnitCursor(ctx, p, 0, "old-2"), ErrUnitTakenOver)
	require.ErrorIs(t, lOld.FinishUnit(ctx, p, 0, UnitEnd{Cursor: "old-3"}), ErrUnitTakenOver)
	took, err = lOld.TakeOverUnit(ctx, p, stale[0])
	require.NoError(t, err)
	require.False(t, took, "the marker no longer names the lease it named when read")
	require.Equal(t, before, rawItem(t, db, table, pk, 0), "the stale holder changed nothing")
	require.NoError(t, lNew.FinishUnit(ctx, p, 0, UnitEnd{Cursor: "new"}))
	require.ErrorIs(t, lOld.Release(ctx), ErrLeaseLost)
}
