package lock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/clock"
)

const (
	ttl  = 10 * time.Second
	hb   = 3 * time.Second
	skew = 500 * time.Millisecond
	poll = time.Second
)

func timingOpts(clk Clock, owner string) []Option {
	return []Option{WithClock(clk), WithOwner(owner), WithLeaseTTL(ttl), WithHeartbeat(hb),
		WithMaxClockSkew(skew), WithPollInterval(poll)}
}

func TestHeartbeatRenews(t *testing.T) {
	db, table := lockTable(t)
	clk := clock.NewFake(t0)
	a, ev := newClient(t, db, table, timingOpts(clk, "a")...)
	l, err := a.TryAcquireSlot(context.Background(), "g", 1)
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		clk.Advance(hb)
		require.Equal(t, "ok", recv(t, ev.renewed, "renew"))
		require.Equal(t, clk.Now().Add(ttl), l.ExpiresAt())
		require.NoError(t, l.Err())
		item := rawItem(t, db, table, l.pk, l.slot)
		require.Equal(t, int64(1+i), getN(item, attrVersion), "version +1 per heartbeat")
		require.Equal(t, clk.Now().Add(ttl), getT(item, attrExpiresAt))
		require.Equal(t, int64(1), getN(item, attrToken), "renews keep the token")
	}
	release(t, l)
}

// A holder cut off from DynamoDB (its writes are dropped, as for a crashed process) is replaced by
// a standby within TTL + skew + one poll interval, and its own context ends before that.
func TestTakeoverAfterHolderStopsRenewing(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	fa := newFaultyDB(db)
	a, aev := newClient(t, fa, table, timingOpts(clk, "a")...)
	b, bev := newClient(t, db, table, timingOpts(clk, "b")...)

	la, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	require.NoError(t, la.SaveCheckpoint(ctx, "a-was-here"))
	fa.dropWrites.Store(true)
	expires := la.ExpiresAt()
	localExpiry := expires.Add(-a.margin)

	res := standby(ctx, b, "g", 1)
	var got acquired
	for done := false; !done; {
		select {
		case wake := <-bev.standby:
			if la.Err() == nil && !wake.Before(localExpiry) {
				// Step exactly onto the holder's local expiry so its cancellation time is exact.
				advanceTo(clk, localExpiry)
				waitDone(t, la, "holder's local expiry")
			}
			advanceTo(clk, wake)
		case got = <-res:
			done = true
		case <-time.After(failsafe):
			t.Fatal("standby never acquired")
		}
	}
	require.NoError(t, got.err)
	lb := got.lease
	require.ErrorIs(t, la.Err(), ErrLeaseLost, "the cut-off holder's context says lost")
	require.Equal(t, localExpiry, la.endedAt, "cancelled at expires_at - safety margin")
	require.True(t, la.endedAt.Before(lb.AcquiredAt()), "old holder cancelled before the new holder acquired")
	require.True(t, lb.AcquiredAt().After(expires.Add(skew)), "not taken before expires_at + skew")
	require.LessOrEqual(t, lb.AcquiredAt().Sub(la.AcquiredAt()), ttl+skew+poll, "within TTL + skew + one poll")
	require.True(t, lb.TookOver())
	require.Equal(t, la.Token()+1, lb.Token())
	require.Equal(t, "a-was-here", lb.Checkpoint())
	for len(aev.renewed) > 0 {
		require.NotEqual(t, "ok", <-aev.renewed, "no renew got through")
	}

	fa.dropWrites.Store(false)
	require.ErrorIs(t, la.Release(ctx), ErrLeaseLost)
	release(t, lb)
}

// TestStandbyWakesWhenLeaseRunsOut: a standby that sees a held lease run out before its next poll
// looks again just after it runs out (expires_at + MaxClockSkew, spread over a tenth of the poll
// interval), not up to a whole poll later, and takes the slot then.
func TestStandbyWakesWhenLeaseRunsOut(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	const longPoll = 5 * time.Second
	fa := newFaultyDB(db)
	a, _ := newClient(t, fa, table, timingOpts(clk, "a")...)
	b, bev := newClient(t, db, table, append(timingOpts(clk, "b"), WithPollInterval(longPoll))...)

	la, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	fa.dropWrites.Store(true) // a is cut off: its lease runs out at expires
	expires := la.ExpiresAt()
	advanceTo(clk, expires.Add(-time.Second))

	res := standby(ctx, b, "g", 1)
	wake := recv(t, bev.standby, "standby waits")
	freeAt := expires.Add(skew)
	require.True(t, wake.After(freeAt), "wakes at %s, before the slot is free at %s", wake, freeAt)
	require.LessOrEqual(t, wake.Sub(freeAt), longPoll/10+time.Millisecond,
		"looks again just after the lease runs out (a regular poll waits %s to %s)", longPoll/2, longPoll)
	advanceTo(clk, wake)
	got := recv(t, res, "standby acquires")
	require.NoError(t, got.err)
	require.True(t, got.lease.TookOver())
	require.Equal(t, wake, got.lease.AcquiredAt())
	waitDone(t, la, "a's local expiry")
	fa.dropWrites.Store(false)
	require.ErrorIs(t, la.Release(ctx), ErrLeaseLost)
	release(t, got.lease)
}

func TestTakeoverAfterRelease(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	a, _ := newClient(t, db, table, timingOpts(clk, "a")...)
	b, bev := newClient(t, db, table, timingOpts(clk, "b")...)
	la, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	res := standby(ctx, b, "g", 1)
	wake := recv(t, bev.standby, "standby waits")
	clk.Advance(100 * time.Millisecond)
	require.NoError(t, la.Release(ctx))
	releasedAt := clk.Now()
	advanceTo(clk, wake)
	got := recv(t, res, "standby acquires")
	require.NoError(t, got.err)
	lb := got.lease
	require.LessOrEqual(t, lb.AcquiredAt().Sub(releasedAt), poll, "within one poll interval of the release")
	require.False(t, lb.TookOver())
	require.Equal(t, int64(2), lb.Token())
	require.True(t, la.PreviousExpiry().IsZero(), "a slot never held")
	require.True(t, lb.PreviousExpiry().Equal(la.ExpiresAt()), "the expiry a's last renew wrote (the release leaves it): %s, want %s", lb.PreviousExpiry(), la.ExpiresAt())
	require.ErrorIs(t, la.Err(), ErrReleased)
	require.False(t, la.endedAt.After(releasedAt), "released context cancelled before the release write")
	release(t, lb)
}

// A holder whose slot was taken over (here: another client's clock is far ahead) is fenced: its
// renew, checkpoint, finish (alone, with a checkpoint, with the release) and release fail with ErrLeaseLost and leave the item unchanged.
func TestStaleHolderIsFenced(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clkA, clkB := clock.NewFake(t0), clock.NewFake(t0.Add(time.Hour))
	a, aev := newClient(t, db, table, timingOpts(clkA, "a")...)
	b, _ := newClient(t, db, table, timingOpts(clkB, "b")...)

	la, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	lb, err := b.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err, "b's clock says a's lease expired long ago")
	require.True(t, lb.TookOver())
	require.Equal(t, la.Token()+1, lb.Token())
	require.NoError(t, lb.SaveCheckpoint(ctx, "b"))
	before := rawItem(t, db, table, la.pk, la.slot)

	clkA.Advance(hb)
	require.Equal(t, "lost", recv(t, aev.renewed, "a's renew"))
	waitDone(t, la, "a's lease lost")
	require.ErrorIs(t, la.Err(), ErrLeaseLost)
	require.Equal(t, before, rawItem(t, db, table, la.pk, la.slot), "renew changed nothing")

	require.ErrorIs(t, la.SaveCheckpoint(ctx, "a"), ErrLeaseLost)
	require.ErrorIs(t, la.MarkFinished(ctx), ErrLeaseLost)
	require.ErrorIs(t, la.FinishWithCheckpoint(ctx, "a"), ErrLeaseLost)
	require.ErrorIs(t, la.FinishAndRelease(ctx, "a"), ErrLeaseLost)
	require.ErrorIs(t, la.Release(ctx), ErrLeaseLost)
	require.ErrorIs(t, la.Release(ctx), ErrLeaseLost, "idempotent")
	require.Equal(t, before, rawItem(t, db, table, la.pk, la.slot), "stale writes changed nothing")
	require.NoError(t, lb.Err())
	release(t, lb)
}

// A renew that lands on the server but whose response is lost is settled by a re-read: the lease
// is kept.
func TestRenewWithLostResponseKeepsLease(t *testing.T) {
	db, table := lockTable(t)
	clk := clock.NewFake(t0)
	fa := newFaultyDB(db)
	a, ev := newClient(t, fa, table, timingOpts(clk, "a")...)
	l, err := a.TryAcquireSlot(context.Background(), "g", 1)
	require.NoError(t, err)

	fa.failAfterUpdates.Store(1)
	delivered := fa.updatesDelivered.Load()
	clk.Advance(hb)
	require.Equal(t, "settled", recv(t, ev.renewed, "renew"))
	require.Equal(t, delivered+1, fa.updatesDelivered.Load(), "the renew reached the server")
	require.NoError(t, l.Err())
	require.Equal(t, clk.Now().Add(ttl), l.ExpiresAt())
	require.Equal(t, int64(2), getN(rawItem(t, db, table, l.pk, l.slot), attrVersion))

	// The next renew builds on the settled version.
	clk.Advance(hb)
	require.Equal(t, "ok", recv(t, ev.renewed, "renew"))
	require.Equal(t, int64(3), getN(rawItem(t, db, table, l.pk, l.slot), attrVersion))
	release(t, l)
}

// With WithSkewImmune a contender ignores expires_at (written by another clock) and takes a slot
// only after watching its version stay unchanged for a full TTL on its own clock.
func TestSkewImmuneTakeover(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clkA, clkB := clock.NewFake(t0), clock.NewFake(t0.Add(time.Hour))
	fa := newFaultyDB(db)
	a, aev := newClient(t, fa, table, timingOpts(clkA, "a")...)
	b, _ := newClient(t, db, table, append(timingOpts(clkB, "b"), WithSkewImmune())...)
	both := func(d time.Duration) { clkA.Advance(d); clkB.Advance(d) }

	la, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	_, err = b.TryAcquireSlot(ctx, "g", 1)
	require.ErrorIs(t, err, ErrNoFreeSlot, "expires_at is an hour old by b's clock, but b does not trust it")

	// While a renews, b's watch restarts with every new version.
	for range 4 {
		both(hb)
		require.Equal(t, "ok", recv(t, aev.renewed, "a renews"))
		_, err = b.TryAcquireSlot(ctx, "g", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot)
	}
	require.NoError(t, la.Err())

	// a stops renewing; b has last seen the current version at "now".
	fa.dropWrites.Store(true)
	watchStart := clkB.Now()
	for clkB.Now().Sub(watchStart) < ttl-time.Second {
		both(time.Second)
		_, err = b.TryAcquireSlot(ctx, "g", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot, "only %s watched", clkB.Now().Sub(watchStart))
	}
	both(time.Second)
	waitDone(t, la, "a's local expiry")
	lb, err := b.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err, "version unchanged for a full TTL")
	require.True(t, lb.TookOver())
	require.ErrorIs(t, la.Err(), ErrLeaseLost)
	fa.dropWrites.Store(false)
	require.ErrorIs(t, la.Release(ctx), ErrLeaseLost)
	release(t, lb)
}
