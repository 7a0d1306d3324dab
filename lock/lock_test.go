package lock

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dynapart/dynapart/internal/clock"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

func TestNewValidatesOptions(t *testing.T) {
	db := &faultyDB{}
	cases := []struct {
		name  string
		db    DynamoDBClient
		table string
		opts  []Option
		field string
	}{
		{"nil db", nil, "t", nil, "db"},
		{"empty table", db, "", nil, "table"},
		{"empty owner", db, "t", []Option{WithOwner("")}, "WithOwner"},
		{"zero ttl", db, "t", []Option{WithLeaseTTL(0), WithHeartbeat(time.Second)}, "WithLeaseTTL"},
		{"ttl not above 2 heartbeats", db, "t", []Option{WithLeaseTTL(2 * time.Second), WithHeartbeat(time.Second)}, "WithLeaseTTL"},
		{"zero heartbeat", db, "t", []Option{WithHeartbeat(0)}, "WithHeartbeat"},
		{"negative heartbeat is not the default", db, "t", []Option{WithHeartbeat(-time.Second)}, "WithHeartbeat"},
		{"2 x heartbeat overflows", db, "t", []Option{WithLeaseTTL(math.MaxInt64), WithHeartbeat(1 << 62)}, "WithLeaseTTL"},
		{"negative margin", db, "t", []Option{WithSafetyMargin(-time.Second)}, "WithSafetyMargin"},
		{"margin + heartbeat overflows", db, "t", []Option{WithSafetyMargin(math.MaxInt64)}, "WithSafetyMargin"},
		{"negative skew", db, "t", []Option{WithMaxClockSkew(-time.Second)}, "WithMaxClockSkew"},
		{"margin too large", db, "t", []Option{WithLeaseTTL(10 * time.Second), WithHeartbeat(3 * time.Second), WithSafetyMargin(7 * time.Second)}, "WithSafetyMargin"},
		{"zero poll", db, "t", []Option{WithPollInterval(0)}, "WithPollInterval"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.db, tc.table, tc.opts...)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
		})
	}

	c, err := New(db, "t")
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, c.ttl)
	require.Equal(t, 10*time.Second/3, c.heartbeat)
	require.Equal(t, time.Second, c.skew)
	require.Equal(t, 10*time.Second/3/2, c.margin, "max(heartbeat/2, skew)")
	require.NotEmpty(t, c.Owner())
	require.Equal(t, "t", c.Table())

	ctx := context.Background()
	for _, tc := range []struct {
		group string
		n     int
		field string
	}{{"", 1, "group"}, {"", 0, "group"}, {"g", -1, "n"}} { // n = 0 joins at the current n
		_, err := c.AcquireSlot(ctx, tc.group, tc.n)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, tc.field, ce.Field)
	}
	_, err = c.NewMutex("").TryLock(ctx)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Zero(t, db.calls.Load(), "validation happens before any DynamoDB call")
}

func TestTableErrors(t *testing.T) {
	db := ddbtest.Client(t)
	ctx := context.Background()

	missing := ddbtest.TableName(t, "missing")
	var te *TableError
	require.ErrorAs(t, CheckTable(ctx, db, missing), &te)
	require.Equal(t, missing, te.Table)
	c, _ := newClient(t, db, missing)
	_, err := c.AcquireSlot(ctx, "g", 2)
	require.ErrorAs(t, err, &te)
	require.Equal(t, missing, te.Table)
	_, err = c.GroupStatus(ctx, "g")
	require.ErrorAs(t, err, &te)

	wrong := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	te = nil
	require.ErrorAs(t, CheckTable(ctx, db, wrong), &te)
	require.Equal(t, wrong, te.Table)
	te = nil
	require.ErrorAs(t, CreateTable(ctx, db, wrong), &te, "an existing table with another key schema is refused")
	require.Equal(t, wrong, te.Table)
	cw, _ := newClient(t, db, wrong)
	te = nil
	_, err = cw.TryAcquireSlot(ctx, "g", 2)
	require.ErrorAs(t, err, &te, "ValidationException from a wrongly keyed table")
	require.Equal(t, wrong, te.Table)

	// CreateTable is idempotent.
	name := ddbtest.TableName(t, "lock")
	ddbtest.DeleteOnCleanup(t, db, name)
	require.NoError(t, CreateTable(ctx, db, name))
	require.NoError(t, CreateTable(ctx, db, name))
	require.NoError(t, CheckTable(ctx, db, name))
}

func TestAcquireReleaseTokensAndCheckpoint(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	c, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))

	seen := map[int]bool{}
	var leases []*Lease
	for range 3 {
		l, err := c.TryAcquireSlot(ctx, "g", 3)
		require.NoError(t, err)
		require.False(t, seen[l.Slot()], "slot %d handed out twice", l.Slot())
		seen[l.Slot()] = true
		require.Equal(t, int64(1), l.Token())
		require.Equal(t, "a", l.Owner())
		require.Equal(t, "g", l.Group())
		require.NoError(t, l.Err())
		require.False(t, l.TookOver())
		require.Equal(t, t0, l.AcquiredAt())
		require.Equal(t, t0.Add(10*time.Second), l.ExpiresAt())
		leases = append(leases, l)
	}
	_, err := c.TryAcquireSlot(ctx, "g", 3)
	require.ErrorIs(t, err, ErrNoFreeSlot)

	first := leases[0]
	require.NoError(t, first.SaveCheckpoint(ctx, "cursor-42"))
	require.NoError(t, first.Release(ctx))
	require.NoError(t, first.Release(ctx), "Release is idempotent")
	require.ErrorIs(t, first.Err(), ErrReleased)
	require.ErrorIs(t, context.Cause(first.Context()), ErrReleased)
	select {
	case <-first.Done():
	default:
		t.Fatal("Done not closed after Release")
	}
	err = first.SaveCheckpoint(ctx, "late")
	require.ErrorIs(t, err, ErrLeaseLost, "no writes through a released lease")

	again, err := c.TryAcquireSlot(ctx, "g", 3)
	require.NoError(t, err)
	require.Equal(t, first.Slot(), again.Slot(), "the released slot is the only free one")
	require.Equal(t, int64(2), again.Token(), "tokens grow on every acquisition")
	require.False(t, again.TookOver(), "a released slot is not a takeover")
	require.Equal(t, "cursor-42", again.Checkpoint(), "the next holder resumes from the checkpoint")

	st, err := c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, 3, st.N)
	require.Len(t, st.Slots, 3)
	for _, s := range st.Slots {
		require.True(t, s.Held)
		require.Equal(t, "a", s.Owner)
	}
	require.Equal(t, "cursor-42", st.Slots[again.Slot()].Checkpoint)
	require.Equal(t, int64(2), st.Slots[again.Slot()].Token)
	release(t, again, leases[1], leases[2])
}

func TestGroupMismatchNamesBothValues(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	a, _ := newClient(t, db, table, WithOwner("a"))
	b, _ := newClient(t, db, table, WithOwner("b"))

	l, err := a.AcquireSlot(ctx, "g", 4, WithGroupMeta(map[string]string{"mode": "segment"}))
	require.NoError(t, err)
	defer release(t, l)

	_, err = b.AcquireSlot(ctx, "g", 5, WithGroupMeta(map[string]string{"mode": "segment"}))
	var gm *GroupMismatchError
	require.ErrorAs(t, err, &gm)
	require.ErrorIs(t, err, ErrGroupMismatch)
	require.Equal(t, GroupMismatchError{Group: "g", Field: "n", Have: "4", Want: "5"}, *gm)

	_, err = b.AcquireSlot(ctx, "g", 4, WithGroupMeta(map[string]string{"mode": "filter"}))
	require.ErrorAs(t, err, &gm)
	require.Equal(t, GroupMismatchError{Group: "g", Field: "meta.mode", Have: "segment", Want: "filter"}, *gm)

	// Agreeing callers (or callers that do not state meta) are fine.
	l2, err := b.AcquireSlot(ctx, "g", 4, WithGroupMeta(map[string]string{"mode": "segment"}))
	require.NoError(t, err)
	l3, err := b.AcquireSlot(ctx, "g", 4)
	require.NoError(t, err)
	release(t, l2, l3)

	st, err := a.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, 4, st.N)
	require.Equal(t, map[string]string{"mode": "segment"}, st.Meta)
}

// Two fresh contenders with different n race for an empty group: one of them must be refused,
// and the refused one must not keep a slot.
func TestGroupMismatchAtColdStart(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	a, _ := newClient(t, db, table, WithOwner("a"))
	b, _ := newClient(t, db, table, WithOwner("b"))
	ra, rb := standby(ctx, a, "g", 2), standby(ctx, b, "g", 3)
	x, y := recv(t, ra, "a"), recv(t, rb, "b")
	require.True(t, (x.err == nil) != (y.err == nil), "exactly one wins: %v / %v", x.err, y.err)
	win, lose := x, y
	if x.err != nil {
		win, lose = y, x
	}
	require.ErrorIs(t, lose.err, ErrGroupMismatch)
	require.Equal(t, 1, heldSlots(t, a, "g"), "the refused contender gave its slot back")
	release(t, win.lease)
}

func TestFinishedResetAndStatus(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	c, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))

	st, err := c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, 0, st.N, "a group never used has no n")
	require.Empty(t, st.Slots)

	l0, err := c.TryAcquireSlot(ctx, "g", 3)
	require.NoError(t, err)
	st, err = c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.Len(t, st.Slots, 3, "slots never acquired appear too")
	for _, s := range st.Slots {
		if s.Slot == l0.Slot() {
			require.Equal(t, SlotStatus{Slot: s.Slot, Owner: "a", Token: 1, Version: 1, ExpiresAt: t0.Add(10 * time.Second), Held: true}, s)
		} else {
			require.Equal(t, SlotStatus{Slot: s.Slot}, s)
		}
	}

	require.ErrorIs(t, c.ResetGroup(ctx, "g"), ErrGroupBusy, "no reset while a slot is held")

	l1, err := c.TryAcquireSlot(ctx, "g", 3)
	require.NoError(t, err)
	l2, err := c.TryAcquireSlot(ctx, "g", 3)
	require.NoError(t, err)
	finish := func(l *Lease) {
		require.NoError(t, l.SaveCheckpoint(ctx, "done"))
		require.NoError(t, l.MarkFinished(ctx))
		require.NoError(t, l.Release(ctx))
	}
	finish(l0)
	_, err = c.TryAcquireSlot(ctx, "g", 3)
	require.ErrorIs(t, err, ErrNoFreeSlot, "a finished slot is never handed out")
	finish(l1)
	finish(l2)
	_, err = c.TryAcquireSlot(ctx, "g", 3)
	require.ErrorIs(t, err, ErrGroupFinished)
	_, err = c.AcquireSlot(ctx, "g", 3)
	require.ErrorIs(t, err, ErrGroupFinished, "AcquireSlot does not wait on a finished group")

	st, err = c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	for _, s := range st.Slots {
		require.True(t, s.Finished)
		require.True(t, s.Released)
		require.False(t, s.Held)
	}

	require.NoError(t, c.ResetGroup(ctx, "g"))
	st, err = c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	for _, s := range st.Slots {
		require.False(t, s.Finished)
		require.Empty(t, s.Checkpoint)
	}
	l, err := c.TryAcquireSlot(ctx, "g", 3)
	require.NoError(t, err)
	require.Empty(t, l.Checkpoint())
	require.Equal(t, int64(2), l.Token())
	release(t, l)
}

// A standby waiting for a slot returns ErrGroupFinished as soon as the other slots finish.
func TestStandbyReturnsGroupFinished(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	a, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))
	b, ev := newClient(t, db, table, WithClock(clk), WithOwner("b"))
	l0, err := a.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	l1, err := a.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)

	res := standby(ctx, b, "g", 2)
	wake := recv(t, ev.standby, "standby wait")
	require.NoError(t, l0.MarkFinished(ctx))
	require.NoError(t, l0.Release(ctx))
	advanceTo(clk, wake)
	wake = recv(t, ev.standby, "standby keeps waiting: the free slot is finished")
	require.NoError(t, l1.MarkFinished(ctx))
	require.NoError(t, l1.Release(ctx))
	finishedAt := clk.Now()
	advanceTo(clk, wake)
	r := recv(t, res, "standby result")
	require.ErrorIs(t, r.err, ErrGroupFinished)
	require.LessOrEqual(t, clk.Now().Sub(finishedAt), time.Second, "within one poll interval")
}

func TestStandbyCancelledByContext(t *testing.T) {
	db, table := lockTable(t)
	clk := clock.NewFake(t0)
	a, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))
	b, ev := newClient(t, db, table, WithClock(clk), WithOwner("b"))
	l, err := a.TryAcquireSlot(context.Background(), "g", 1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	res := standby(ctx, b, "g", 1)
	recv(t, ev.standby, "standby wait")
	cancel()
	r := recv(t, res, "standby result")
	require.ErrorIs(t, r.err, context.Canceled)
	require.Nil(t, r.lease)
	release(t, l)
}

func TestMutex(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	a, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))
	b, ev := newClient(t, db, table, WithClock(clk), WithOwner("b"))
	ma, mb := a.NewMutex("deploy"), b.NewMutex("deploy")

	require.ErrorIs(t, ma.Unlock(ctx), ErrNotLocked)
	require.Nil(t, ma.Lease())
	require.NoError(t, ma.Lock(ctx))
	la := ma.Lease()
	require.NotNil(t, la)
	require.Equal(t, int64(1), la.Token())
	require.Equal(t, "deploy", la.Group())
	require.Equal(t, 0, la.Slot())

	ok, err := mb.TryLock(ctx)
	require.NoError(t, err)
	require.False(t, ok, "held by a")
	require.Nil(t, mb.Lease())

	// A group of the same name is a different item.
	gl, err := b.TryAcquireSlot(ctx, "deploy", 1)
	require.NoError(t, err)
	release(t, gl)

	locked := make(chan error, 1)
	go func() { locked <- mb.Lock(ctx) }()
	wake := recv(t, ev.standby, "b waits")
	require.NoError(t, ma.Unlock(ctx))
	require.Nil(t, ma.Lease())
	unlockedAt := clk.Now()
	advanceTo(clk, wake)
	require.NoError(t, recv(t, locked, "b locks"))
	lb := mb.Lease()
	require.Equal(t, int64(2), lb.Token(), "fencing token grows")
	require.LessOrEqual(t, lb.AcquiredAt().Sub(unlockedAt), time.Second, "within one poll interval")

	require.ErrorIs(t, la.SaveCheckpoint(ctx, "x"), ErrLeaseLost, "a's old hold is fenced")
	ok, err = ma.TryLock(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, mb.Unlock(ctx))
	ok, err = ma.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(3), ma.Lease().Token())
	require.NoError(t, ma.Unlock(ctx))
	require.ErrorIs(t, ma.Unlock(ctx), ErrNotLocked)
}

func TestNoGoroutineLeftAfterReleaseOrCancel(t *testing.T) {
	db, table := lockTable(t)
	snapshot := goleak.IgnoreCurrent()
	clk := clock.NewFake(t0)
	a, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))
	b, ev := newClient(t, db, table, WithClock(clk), WithOwner("b"))
	l1, err := a.TryAcquireSlot(context.Background(), "g", 2)
	require.NoError(t, err)
	l2, err := a.TryAcquireSlot(context.Background(), "g", 2)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	res := standby(ctx, b, "g", 2)
	recv(t, ev.standby, "standby waits")
	cancel()
	require.ErrorIs(t, recv(t, res, "standby result").err, context.Canceled)
	clk.Advance(10*time.Second/3 + time.Millisecond) // the heartbeats are mid-flight or just done
	release(t, l1, l2)
	ddbtest.HTTPClient.CloseIdleConnections()
	goleak.VerifyNone(t, snapshot)
}
