package lock

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/clock"
)

// scanAll returns every item of the table, for "nothing written" checks.
func scanAll(t *testing.T, db *dynamodb.Client, table string) []map[string]typesAV {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Items
}

// ResizeGroup changes n and moves the epoch on; bad input, an unknown group and m == n write
// nothing; a caller with the old n is refused, a join takes the new n and records the epoch.
func TestResizeGroup(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	c, _ := newClient(t, db, table, WithClock(clock.NewFake(t0)), WithOwner("a"))

	_, err := c.ResizeGroup(ctx, "nope", 3)
	require.ErrorIs(t, err, ErrGroupNotFound)
	st, err := c.GroupState(ctx, "nope")
	require.NoError(t, err)
	require.Equal(t, GroupState{}, st)
	require.Empty(t, scanAll(t, db, table), "nothing written for an unknown group")

	l, err := c.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	require.Zero(t, l.Epoch(), "a group never resized is at epoch 0")
	before := scanAll(t, db, table)

	for _, m := range []int{0, -1} {
		_, err = c.ResizeGroup(ctx, "g", m)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "n", ce.Field)
	}
	res, err := c.ResizeGroup(ctx, "g", 2)
	require.NoError(t, err)
	require.Equal(t, Resize{OldN: 2, NewN: 2, Epoch: 0, Changed: false}, res)
	require.Equal(t, before, scanAll(t, db, table), "bad input and m == n write nothing")

	res, err = c.ResizeGroup(ctx, "g", 6)
	require.NoError(t, err)
	require.Equal(t, Resize{OldN: 2, NewN: 6, Epoch: 1, Changed: true}, res)
	st, err = c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, GroupState{Exists: true, N: 6, Epoch: 1, Meta: map[string]string{}}, st)
	require.NoError(t, l.Err(), "a resize does not touch the holders' items")
	require.Zero(t, getN(rawItem(t, db, table, groupPK("g"), l.Slot()), attrEpoch))

	_, err = c.TryAcquireSlot(ctx, "g", 2)
	var gm *GroupMismatchError
	require.ErrorAs(t, err, &gm, "the old n is refused")
	require.Equal(t, "n", gm.Field)
	j, err := c.TryAcquireSlot(ctx, "g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), j.Epoch())
	require.Equal(t, int64(1), getN(rawItem(t, db, table, groupPK("g"), j.Slot()), attrEpoch), "the slot item records the epoch")
	res, err = c.ResizeGroup(ctx, "g", 1)
	require.NoError(t, err)
	require.Equal(t, Resize{OldN: 6, NewN: 1, Epoch: 2, Changed: true}, res)
	release(t, l, j)
}

// A resize whose answer is lost is settled by a re-read: it landed once, the epoch moved by one,
// whether the caller saw a transport error or the SDK's retry failing its condition.
func TestResizeLostAnswerSettled(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	setup, _ := newClient(t, db, table, WithOwner("setup"))
	l, err := setup.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	release(t, l)

	lossy := newFaultyDB(db)
	c, _ := newClient(t, lossy, table, WithOwner("a"))
	lossy.failAfterUpdates.Store(1)
	res, err := c.ResizeGroup(ctx, "g", 4)
	require.NoError(t, err)
	require.Equal(t, Resize{OldN: 2, NewN: 4, Epoch: 1, Changed: true}, res)
	require.Equal(t, int64(1), lossy.updatesDelivered.Load(), "one write landed")

	// The next meta-item UpdateItem is sent twice, as the SDK does when the first answer is lost,
	// and answered with the second answer.
	var armed atomic.Bool
	retried := ddbfault.New(db)
	retried.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if getN(call.In.(*dynamodb.UpdateItemInput).Key, attrSK) == metaSK && armed.Swap(false) {
			if _, err := send(ctx, call.In); err != nil {
				return nil, err
			}
		}
		return send(ctx, call.In)
	}, ddbfault.OpUpdateItem)
	c2, _ := newClient(t, retried, table, WithOwner("b"))
	armed.Store(true)
	res, err = c2.ResizeGroup(ctx, "g", 3)
	require.NoError(t, err)
	require.Equal(t, Resize{OldN: 4, NewN: 3, Epoch: 2, Changed: true}, res)
	st, err := c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, 3, st.N)
	require.Equal(t, int64(2), st.Epoch, "each resize moved the epoch once")
}

// A resize that loses its race (another resize landed between its read and its write) reads again
// and applies m on top of the other.
func TestResizeRetriesLostRace(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	setup, _ := newClient(t, db, table, WithOwner("setup"))
	l, err := setup.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	release(t, l)
	var rivalled atomic.Bool
	hooked := before(db, ddbfault.OpUpdateItem, func(in *dynamodb.UpdateItemInput) {
		if getN(in.Key, attrSK) == metaSK && !rivalled.Swap(true) {
			_, err := setup.ResizeGroup(ctx, "g", 5)
			require.NoError(t, err)
		}
	})
	c, _ := newClient(t, hooked, table, WithOwner("a"))
	res, err := c.ResizeGroup(ctx, "g", 8)
	require.NoError(t, err)
	require.True(t, rivalled.Load())
	require.Equal(t, Resize{OldN: 5, NewN: 8, Epoch: 2, Changed: true}, res)
}

// A slot finished under an older epoch is open again: a join takes it (the take's condition lets
// it through and clears finished), a MarkFinished by an old-plan holder after the resize does not
// count, and ErrGroupFinished comes only when every slot is finished under the current epoch.
func TestFinishedOnlyAtCurrentEpoch(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	c, _ := newClient(t, db, table, WithClock(clock.NewFake(t0)), WithOwner("a"))
	finish := func(l *Lease) {
		t.Helper()
		require.NoError(t, l.MarkFinished(ctx))
		require.NoError(t, l.Release(ctx))
	}
	l0, err := c.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	l1, err := c.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	finish(l0)
	_, err = c.ResizeGroup(ctx, "g", 3)
	require.NoError(t, err)
	finish(l1) // an old-plan holder finishing after the resize

	var got []*Lease
	for range 3 {
		l, err := c.TryAcquireSlot(ctx, "g", 0)
		require.NoError(t, err, "every slot is open under epoch 1")
		require.Equal(t, int64(1), l.Epoch())
		raw := rawItem(t, db, table, groupPK("g"), l.Slot())
		require.False(t, getB(raw, attrFinished), "the take clears finished")
		got = append(got, l)
	}
	_, err = c.TryAcquireSlot(ctx, "g", 0)
	require.ErrorIs(t, err, ErrNoFreeSlot)
	st, err := c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	for _, s := range st.Slots {
		require.False(t, s.Finished, "slot %d", s.Slot)
	}
	for _, l := range got[:2] {
		finish(l)
	}
	_, err = c.TryAcquireSlot(ctx, "g", 0)
	require.ErrorIs(t, err, ErrNoFreeSlot, "one slot is still held")
	finish(got[2])
	_, err = c.TryAcquireSlot(ctx, "g", 0)
	require.ErrorIs(t, err, ErrGroupFinished)
	_, err = c.AcquireSlot(ctx, "g", 3)
	require.ErrorIs(t, err, ErrGroupFinished)
}

// A round that reads every slot finished under the epoch it read does not report the group
// finished when a resize landed after its read: the re-opened slots are taken at the next round.
func TestGroupFinishedConfirmedAgainstResize(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	setup, _ := newClient(t, db, table, WithOwner("setup"))
	l, err := setup.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	require.NoError(t, l.MarkFinished(ctx))
	release(t, l)

	// The group is resized after the next Query's answer, before the caller sees it.
	var resized atomic.Bool
	hooked := ddbfault.New(db)
	hooked.OnCall(func(cctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		out, err := send(cctx, call.In)
		if !resized.Swap(true) {
			_, err := setup.ResizeGroup(ctx, "g", 2)
			require.NoError(t, err)
		}
		return out, err
	}, ddbfault.OpQuery)
	c, _ := newClient(t, hooked, table, WithOwner("a"))
	_, err = c.TryAcquireSlot(ctx, "g", 1)
	require.ErrorIs(t, err, ErrNoFreeSlot)
	require.NotErrorIs(t, err, ErrGroupFinished, "the group was resized after the slots were read")
	got, err := c.TryAcquireSlot(ctx, "g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Epoch())
	release(t, got)
}

// n = 0 joins at the group's current n: a missing group is refused at once (no wait), and a
// standby waiting across a resize competes for the new slots at its next poll.
func TestJoinAtCurrentN(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	a, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))
	b, ev := newClient(t, db, table, WithClock(clk), WithOwner("b"))

	_, err := b.TryAcquireSlot(ctx, "nope", 0)
	require.ErrorIs(t, err, ErrGroupNotFound)
	_, err = b.AcquireSlot(ctx, "nope", 0)
	require.ErrorIs(t, err, ErrGroupNotFound, "AcquireSlot does not wait for a group to appear")
	require.Empty(t, ev.standby)
	require.Empty(t, scanAll(t, db, table), "a join never creates the group")

	held, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	res := standby(ctx, b, "g", 0)
	wake := recv(t, ev.standby, "the standby waits: slot 0 of 1 is held")
	_, err = a.ResizeGroup(ctx, "g", 2)
	require.NoError(t, err)
	advanceTo(clk, wake)
	r := recv(t, res, "the standby's lease")
	require.NoError(t, r.err)
	require.Equal(t, 1, r.lease.Slot(), "slot 1 exists under the new n")
	require.Equal(t, int64(1), r.lease.Epoch())
	require.Zero(t, held.Epoch())
	release(t, held, r.lease)
}

// A join of a group larger than a window reads its windows under the current n: after a resize
// from 130 to 200 slots (all held), it finds the new slots 130..199; and a resize re-opens a large
// group whose slots were all finished.
func TestWindowedJoinUsesCurrentN(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	heldGroup(t, db, table, "g", 130)
	c, err := New(db, table, WithOwner("joiner"))
	require.NoError(t, err)
	_, err = c.ResizeGroup(ctx, "g", 200)
	require.NoError(t, err)
	l, err := c.TryAcquireSlot(ctx, "g", 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, l.Slot(), 130)
	require.Less(t, l.Slot(), 200)
	require.Equal(t, int64(1), l.Epoch())
	release(t, l)

	heldGroup(t, db, table, "f", 130)
	finishDirect(t, db, table, "f", 0, 130)
	for s := range 130 {
		releaseDirect(t, db, table, "f", s)
	}
	_, err = c.TryAcquireSlot(ctx, "f", 0)
	require.ErrorIs(t, err, ErrGroupFinished)
	_, err = c.ResizeGroup(ctx, "f", 131)
	require.NoError(t, err)
	l, err = c.TryAcquireSlot(ctx, "f", 0)
	require.NoError(t, err, "the resize re-opened every slot")
	require.Equal(t, int64(1), l.Epoch())
	release(t, l)
}

// OldPlanHolders lists the held slots, also past the current n, whose holders acquired them under
// an older epoch; released slots and new-plan holders are not listed.
func TestOldPlanHolders(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	a, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))
	var old []*Lease
	for range 3 {
		l, err := a.TryAcquireSlot(ctx, "g", 3)
		require.NoError(t, err)
		old = append(old, l)
	}
	_, err := a.ResizeGroup(ctx, "g", 2)
	require.NoError(t, err)
	bySlot := map[int]*Lease{}
	for _, l := range old {
		bySlot[l.Slot()] = l
	}
	release(t, bySlot[1])
	j, err := a.TryAcquireSlot(ctx, "g", 0)
	require.NoError(t, err)
	require.Equal(t, 1, j.Slot())

	got, err := a.OldPlanHolders(ctx, "g", 1)
	require.NoError(t, err)
	require.Equal(t, []int{0, 2}, got, "slot 2 is past n = 2 and still held under epoch 0")
	got, err = a.OldPlanHolders(ctx, "g", 0)
	require.NoError(t, err)
	require.Empty(t, got)
	later, _ := newClient(t, db, table, WithClock(clock.NewFake(t0.Add(time.Minute))), WithOwner("later"))
	got, err = later.OldPlanHolders(ctx, "g", 1)
	require.NoError(t, err)
	require.Empty(t, got, "expired leases are not held")
	release(t, bySlot[0], bySlot[2])
	got, err = a.OldPlanHolders(ctx, "g", 1)
	require.NoError(t, err)
	require.Empty(t, got)
	release(t, j)
}

// GroupStatus shows the plan epoch, each slot's epoch, and the slots past n after a scale-down
// with their checkpoints; a slot finished under the old epoch shows as not finished.
func TestGroupStatusEpochsAndRetiredSlots(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	c, _ := newClient(t, db, table, WithClock(clock.NewFake(t0)), WithOwner("a"))
	for range 3 {
		l, err := c.TryAcquireSlot(ctx, "g", 3)
		require.NoError(t, err)
		require.NoError(t, l.SaveCheckpoint(ctx, fmt.Sprintf("cp%d", l.Slot())))
		require.NoError(t, l.MarkFinished(ctx))
		release(t, l)
	}
	_, err := c.ResizeGroup(ctx, "g", 1)
	require.NoError(t, err)
	l, err := c.TryAcquireSlot(ctx, "g", 0)
	require.NoError(t, err)
	require.Equal(t, 0, l.Slot())
	require.Equal(t, "cp0", l.Checkpoint(), "the checkpoint survives the resize")

	st, err := c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, 1, st.N)
	require.Equal(t, int64(1), st.Epoch)
	require.Len(t, st.Slots, 3, "retired slots 1 and 2 are listed")
	require.Equal(t, int64(1), st.Slots[0].Epoch)
	require.True(t, st.Slots[0].Held)
	for _, s := range st.Slots[1:] {
		require.Equal(t, int64(0), s.Epoch)
		require.Equal(t, fmt.Sprintf("cp%d", s.Slot), s.Checkpoint)
		require.False(t, s.Finished, "finished under epoch 0 only")
	}
	release(t, l)
}

// WithResizeMeta records the keys the meta item lacks, computed from the plan as read, in the
// resize's write; a key already recorded keeps its value, and m == n writes nothing.
func TestResizeMetaPinned(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	c, _ := newClient(t, db, table, WithOwner("a"))
	l, err := c.TryAcquireSlot(ctx, "g", 2, WithGroupMeta(map[string]string{"sub_segments": "4", "mode": "segment"}))
	require.NoError(t, err)
	release(t, l)
	var seen []GroupState
	pin := WithResizeMeta(func(st GroupState) map[string]string {
		seen = append(seen, st)
		return map[string]string{"segments": strconv.Itoa(st.N * 4), "mode": "other"}
	})
	_, err = c.ResizeGroup(ctx, "g", 2, pin)
	require.NoError(t, err)
	require.Empty(t, seen, "m == n: nothing computed, nothing written")
	res, err := c.ResizeGroup(ctx, "g", 6, pin)
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, []GroupState{{Exists: true, N: 2, Epoch: 0, Meta: map[string]string{"sub_segments": "4", "mode": "segment"}}}, seen)
	st, err := c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"sub_segments": "4", "mode": "segment", "segments": "8"}, st.Meta)
	_, err = c.ResizeGroup(ctx, "g", 3, pin)
	require.NoError(t, err)
	st, err = c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, "8", st.Meta["segments"], "a recorded key keeps its value")
	require.Equal(t, int64(2), st.Epoch)
}

// TestResetGroupStartsAnEpoch: ResetGroup moves the plan epoch on and records it as the reset
// epoch, so positions recorded under earlier epochs are known to be the previous run's; a slot
// finished before the reset is open under the new epoch.
func TestResetGroupStartsAnEpoch(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	c, _ := newClient(t, db, table, WithClock(clock.NewFake(t0)), WithOwner("a"))
	l, err := c.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	require.NoError(t, l.MarkFinished(ctx))
	require.NoError(t, l.Release(ctx))
	_, err = c.ResizeGroup(ctx, "g", 2)
	require.NoError(t, err)
	require.NoError(t, c.ResetGroup(ctx, "g"))
	st, err := c.GroupState(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Epoch)
	require.Equal(t, int64(2), st.ResetEpoch)
	gs, err := c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, int64(2), gs.ResetEpoch)
	l, err = c.TryAcquireSlot(ctx, "g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), l.Epoch())
	require.NoError(t, l.Release(ctx))
}
