package lock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/clock"
)

// pauseAfterQuery is a client that holds a contender between its read of the group and its
// acquisition write: once armed, the next Query's answer is held back (read is closed) until
// resume is closed.
type pauseAfterQuery struct {
	DynamoDBClient
	armed  atomic.Bool
	read   chan struct{}
	resume chan struct{}
}

func newPauseAfterQuery(db ddbfault.Next) *pauseAfterQuery {
	fc := ddbfault.New(db)
	p := &pauseAfterQuery{DynamoDBClient: fc, read: make(chan struct{}), resume: make(chan struct{})}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		out, err := send(ctx, call.In)
		if p.armed.Swap(false) {
			close(p.read)
			<-p.resume
		}
		return out, err
	}, ddbfault.OpQuery)
	return p
}

// renewUnknownLanded makes a's next renew land with its answer lost and its settling re-read
// failing, so a does not know that it landed; it returns the expiry that renew wrote.
func renewUnknownLanded(t *testing.T, clk *clock.Fake, fa *faultyDB, aev *events) time.Time {
	t.Helper()
	fa.failAfterUpdates.Store(1)
	fa.failGets.Store(1)
	delivered := fa.updatesDelivered.Load()
	clk.Advance(hb)
	require.Equal(t, "unknown", recv(t, aev.renewed, "a's renew of unknown outcome"))
	require.Equal(t, delivered+1, fa.updatesDelivered.Load(), "the renew landed")
	return clk.Now().Add(ttl)
}

// requireOneHolder fails when b holds the slot while a's lease is still valid by a's own view.
func requireOneHolder(t *testing.T, la *Lease, got acquired) {
	t.Helper()
	if got.err != nil {
		return
	}
	require.Error(t, la.Err(), "two holders: b took the slot at %s while a's lease runs until %s by a's view",
		got.lease.AcquiredAt().Format(time.RFC3339Nano), la.localExpiry().Format(time.RFC3339Nano))
	require.False(t, la.endedAt.After(got.lease.AcquiredAt()), "a's lease ended before b took the slot")
}

// A renew of unknown outcome that landed, then a later renew that landed too: a contender that
// read the item as the first one left it (its read came before the second renew, its write after
// the first renew's expiry) must not take the slot: a holds it until the second renew's expiry.
// The second renew must change what the contender's write is conditioned on.
func TestRenewAfterUnknownLandedRenewFencesStaleView(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	fa := newFaultyDB(db)
	a, aev := newClient(t, fa, table, timingOpts(clk, "a")...)
	pb := newPauseAfterQuery(db)
	b, _ := newClient(t, pb, table, timingOpts(clk, "b")...)
	resume := sync.OnceFunc(func() { close(pb.resume) })
	t.Cleanup(resume)

	la, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	exp1 := renewUnknownLanded(t, clk, fa, aev)

	// b reads the item as the unknown renew left it, and is held before its write.
	pb.armed.Store(true)
	res := make(chan acquired, 1)
	go func() {
		l, err := b.TryAcquireSlot(ctx, "g", 1)
		res <- acquired{l, err}
	}()
	recv(t, pb.read, "b's read")

	clk.Advance(hb)
	require.Equal(t, "ok", recv(t, aev.renewed, "a's next renew"))
	require.True(t, la.ExpiresAt().After(exp1.Add(skew)), "a's lease now runs past the first renew's expiry + skew")

	// a is cut off: nothing it sends lands, so the item stays as the second renew left it.
	fa.dropWrites.Store(true)
	for clk.Now().Add(hb).Before(exp1.Add(skew)) {
		clk.Advance(hb)
		require.Equal(t, "unknown", recv(t, aev.renewed, "a's renew while cut off"))
	}
	advanceTo(clk, exp1.Add(skew+time.Millisecond))
	require.NoError(t, la.Err(), "a's lease is valid by a's view")
	resume()
	got := recv(t, res, "b's acquisition")
	requireOneHolder(t, la, got)
	require.ErrorIs(t, got.err, ErrNoFreeSlot, "b's view is stale: a renewed after it")

	// Once a's lease has expired by the item, b takes the slot.
	advanceTo(clk, la.ExpiresAt().Add(skew+time.Millisecond))
	waitDone(t, la, "a's local expiry")
	lb, err := b.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	require.True(t, lb.TookOver())
	fa.dropWrites.Store(false)
	require.ErrorIs(t, la.Release(ctx), ErrLeaseLost)
	release(t, lb)
}

// A renew of unknown outcome that landed, then a renew that did not land but whose re-read found
// the first renew's version: the holder must adopt the expiry on the item (the first renew's), not
// the one it tried to write, or a contender reading the item takes the slot while the holder
// believes it still holds it.
func TestRenewSettledAdoptsTheItemsExpiry(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	fa := newFaultyDB(db)
	a, aev := newClient(t, fa, table, timingOpts(clk, "a")...)
	b, _ := newClient(t, db, table, timingOpts(clk, "b")...)

	la, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	exp1 := renewUnknownLanded(t, clk, fa, aev)

	// a is cut off: its next renew does not land, but its re-read finds the first renew.
	fa.dropWrites.Store(true)
	clk.Advance(hb)
	require.Equal(t, "settled", recv(t, aev.renewed, "a's renew that did not land"))
	require.Equal(t, exp1, la.ExpiresAt(), "the expiry on the item")
	for {
		_, err := b.TryAcquireSlot(ctx, "g", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot)
		if !clk.Now().Add(hb).Before(exp1.Add(skew)) {
			break
		}
		clk.Advance(hb)
		if clk.Now().Before(la.localExpiry()) {
			require.Equal(t, "unknown", recv(t, aev.renewed, "a's renew while cut off"))
		} else {
			waitDone(t, la, "a's local expiry")
		}
	}
	advanceTo(clk, exp1.Add(skew+time.Millisecond))
	lb, err := b.TryAcquireSlot(ctx, "g", 1)
	requireOneHolder(t, la, acquired{lb, err})
	require.NoError(t, err, "a's lease expired by the item")
	require.True(t, lb.TookOver())
	fa.dropWrites.Store(false)
	require.ErrorIs(t, la.Release(ctx), ErrLeaseLost)
	release(t, lb)
}

// oldHolder makes "old" the holder of slot 0 of group, expiring at exp, as a holder running this
// package from before renewals were conditioned on their version would.
func oldHolder(t *testing.T, db *dynamodb.Client, table, group string, exp time.Time) {
	t.Helper()
	it := key(groupPK(group), 0)
	it[attrOwner], it[attrToken], it[attrVersion] = avS("old"), avN(1), avN(1)
	it[attrExpiresAt], it[attrAcquiredAt], it[attrReleased], it[attrNonce] = avT(exp), avT(t0), avB(false), avS("n-old")
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it})
	require.NoError(t, err)
}

// oldRenew moves the expiry of slot 0 of group and keeps its version, as that holder's renew did
// when it rewrote the version of an earlier renew of unknown outcome.
func oldRenew(t *testing.T, db *dynamodb.Client, table, group string, exp time.Time) {
	t.Helper()
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK(group), 0),
		UpdateExpression:          aws.String("SET expires_at = :exp"),
		ExpressionAttributeValues: map[string]typesAV{":exp": avT(exp)}})
	require.NoError(t, err)
}

// A take is conditioned on the expiry it read too: against a holder whose renew kept the version
// (an older release of this package), a contender whose read came before that renew does not take
// the slot after the expiry it read, and a skew-immune contender restarts its watch.
func TestTakeRequiresTheExpiryItRead(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	exp1, exp2 := t0.Add(ttl), t0.Add(hb+ttl)

	t.Run("stale read", func(t *testing.T) {
		oldHolder(t, db, table, "g", exp1)
		pb := newPauseAfterQuery(db)
		b, _ := newClient(t, pb, table, timingOpts(clk, "b")...)
		resume := sync.OnceFunc(func() { close(pb.resume) })
		t.Cleanup(resume)
		pb.armed.Store(true)
		res := make(chan acquired, 1)
		go func() {
			l, err := b.TryAcquireSlot(ctx, "g", 1)
			res <- acquired{l, err}
		}()
		recv(t, pb.read, "b's read")
		oldRenew(t, db, table, "g", exp2)
		advanceTo(clk, exp1.Add(skew+time.Millisecond))
		resume()
		got := recv(t, res, "b's acquisition")
		require.ErrorIs(t, got.err, ErrNoFreeSlot, "the holder renewed after b's read")
		_, err := b.TryAcquireSlot(ctx, "g", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot)
		advanceTo(clk, exp2.Add(skew+time.Millisecond))
		lb, err := b.TryAcquireSlot(ctx, "g", 1)
		require.NoError(t, err, "expired by the item")
		require.True(t, lb.TookOver())
		release(t, lb)
	})

	t.Run("skew-immune watch", func(t *testing.T) {
		start := clk.Now()
		oldHolder(t, db, table, "h", start.Add(ttl))
		b, _ := newClient(t, db, table, append(timingOpts(clk, "b"), WithSkewImmune())...)
		_, err := b.TryAcquireSlot(ctx, "h", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot, "the watch starts")
		clk.Advance(hb)
		oldRenew(t, db, table, "h", clk.Now().Add(ttl))
		renewedAt := clk.Now()
		_, err = b.TryAcquireSlot(ctx, "h", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot)
		advanceTo(clk, start.Add(ttl))
		_, err = b.TryAcquireSlot(ctx, "h", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot, "the expiry moved %s after the watch began: it restarts", hb)
		advanceTo(clk, renewedAt.Add(ttl))
		lb, err := b.TryAcquireSlot(ctx, "h", 1)
		require.NoError(t, err, "unchanged for a full TTL")
		release(t, lb)
	})
}

// replayUpdates is a hook that sends each of the next *replay UpdateItems twice and answers with
// the second result, as the SDK's retry of a write whose first answer was lost does.
func replayUpdates(replay *atomic.Int32) ddbfault.Hook {
	return func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if replay.Add(-1) < 0 {
			replay.Store(0)
			return send(ctx, call.In)
		}
		if _, err := send(ctx, call.In); err != nil {
			return nil, err
		}
		return send(ctx, call.In)
	}
}

// A renew whose first answer is lost and whose retry then fails its version condition finds its
// own write on the item (with ALL_OLD, or by a re-read without): the lease keeps it, with the
// version and expiry it wrote, and the next renew builds on them.
func TestRenewRetryFindsItsOwnWrite(t *testing.T) {
	db, table := lockTable(t)
	for _, hideAllOld := range []bool{false, true} {
		t.Run(fmt.Sprintf("hide ALL_OLD %t", hideAllOld), func(t *testing.T) {
			clk := clock.NewFake(t0)
			var replay atomic.Int32
			adb := ddbfault.New(db)
			if hideAllOld {
				adb.OnCall(dropAllOld, ddbfault.OpPutItem, ddbfault.OpUpdateItem)
			}
			adb.OnCall(replayUpdates(&replay), ddbfault.OpUpdateItem)
			a, ev := newClient(t, adb, table, timingOpts(clk, "a")...)
			group := fmt.Sprintf("g%t", hideAllOld)
			l, err := a.TryAcquireSlot(context.Background(), group, 1)
			require.NoError(t, err)

			replay.Store(1)
			clk.Advance(hb)
			require.Equal(t, "settled", recv(t, ev.renewed, "renew"))
			require.NoError(t, l.Err())
			require.Equal(t, clk.Now().Add(ttl), l.ExpiresAt())
			item := rawItem(t, db, table, l.pk, l.slot)
			require.Equal(t, int64(2), getN(item, attrVersion), "one renew landed")
			require.Equal(t, clk.Now().Add(ttl), getT(item, attrExpiresAt))

			clk.Advance(hb)
			require.Equal(t, "ok", recv(t, ev.renewed, "renew"))
			require.Equal(t, int64(3), getN(rawItem(t, db, table, l.pk, l.slot), attrVersion))
			release(t, l)
		})
	}
}
