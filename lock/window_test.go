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

// A standby's poll of a large group reads one window of slots and the meta item, not the group;
// only its first round reads every window (nothing is free).
func TestStandbyPollBoundedInN(t *testing.T) {
	db, table := lockTable(t)
	for _, n := range []int{10, 300} {
		group := fmt.Sprintf("g%d", n)
		heldGroup(t, db, table, group, n)
		cost := standbyPolls(t, db, table, group, n, 5)
		require.LessOrEqual(t, cost.items, float64(windowSize+1), "n = %d", n)
		require.LessOrEqual(t, cost.calls, 2.0, "n = %d", n)
		require.Equal(t, float64(n+1), cost.firstItems, "n = %d: the first round sweeps the whole group once", n)
	}
}

func releaseDirect(t *testing.T, db *dynamodb.Client, table, group string, slot int) {
	t.Helper()
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK(group), slot),
		UpdateExpression: aws.String("SET released = :t"), ExpressionAttributeValues: map[string]typesAV{":t": avB(true)}})
	require.NoError(t, err)
}

// TryAcquireSlot on a group larger than a window looks at every window: a free slot anywhere is
// found in one call.
func TestTryAcquireSlotSweepsLargeGroup(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n, free = 200, 137
	heldGroup(t, db, table, "g", n)
	releaseDirect(t, db, table, "g", free)
	c, err := New(db, table, WithOwner("standby"))
	require.NoError(t, err)
	l, err := c.TryAcquireSlot(ctx, "g", n)
	require.NoError(t, err)
	require.Equal(t, free, l.Slot())
	require.Equal(t, int64(2), l.Token())
	require.NoError(t, l.Release(ctx))
}

// A waiting standby of a group larger than a window, polling one window at a time, finds a slot
// released after its first round within ceil(n/windowSize) polls.
func TestWindowedStandbyFindsReleasedSlot(t *testing.T) {
	db, table := lockTable(t)
	const n, free = 200, 137
	heldGroup(t, db, table, "g", n)
	c, err := New(db, table, WithOwner("standby"), WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	polls := 0
	c.hooks.standby = func(string, time.Time) {
		polls++
		if polls == 1 {
			releaseDirect(t, db, table, "g", free)
		}
	}
	l, err := c.AcquireSlot(ctx, "g", n)
	require.NoError(t, err)
	require.Equal(t, free, l.Slot())
	require.LessOrEqual(t, polls, 1+(n+windowSize-1)/windowSize)
	require.NoError(t, l.Release(context.Background()))
}

// A large group whose slots are all finished is reported finished (a window alone cannot tell).
func TestWindowedGroupFinished(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n = 130
	heldGroup(t, db, table, "g", n)
	for s := range n {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK("g"), s),
			UpdateExpression: aws.String("SET finished = :t"), ExpressionAttributeValues: map[string]typesAV{":t": avB(true)}})
		require.NoError(t, err)
	}
	c, err := New(db, table, WithOwner("late"))
	require.NoError(t, err)
	_, err = c.TryAcquireSlot(ctx, "g", n)
	require.ErrorIs(t, err, ErrGroupFinished)
}

// windowFrom is the first sort key a windowed Query reads, or -2 for a whole-group Query.
func windowFrom(in *dynamodb.QueryInput) int {
	if v, ok := in.ExpressionAttributeValues[":lo"].(*typesN); ok {
		n, _ := strconv.Atoi(v.Value)
		return n
	}
	return -2
}

// bumpVersions adds one to the version of slots lo..hi-1, as their holder's renewals do.
func bumpVersions(t *testing.T, db *dynamodb.Client, table, group string, lo, hi int) {
	t.Helper()
	for s := lo; s < hi; s++ {
		_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK(group), s),
			UpdateExpression:          aws.String("SET version = version + :one"),
			ExpressionAttributeValues: map[string]typesAV{":one": avN(1)}})
		require.NoError(t, err)
	}
}

// In the skew-immune mode a sweep that reads a window late (the sweep's earlier Queries took a
// while) starts watching that window's versions when it read them, not when the round began: a
// holder renewing just before the late read keeps its slot until a full TTL after that renewal.
func TestSkewImmuneSweepWatchesFromTheRead(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n = 130 // windows 0..63, 64..127, 128..129
	heldGroup(t, db, table, "g", n)
	clk := clock.NewFake(t0)
	renewedAt := t0.Add(5 * time.Second)
	hooked := before(db, ddbfault.OpQuery, func(in *dynamodb.QueryInput) {
		if windowFrom(in) == 64 && clk.Now().Before(renewedAt) {
			// The sweep reaches its second window 5s after it began; the holder renewed every
			// slot just before that read.
			advanceTo(clk, renewedAt)
			bumpVersions(t, db, table, "g", 0, n)
		}
	})
	c, _ := newClient(t, hooked, table, append(timingOpts(clk, "standby"), WithSkewImmune())...)
	c.cursor = map[string]int{groupPK("g"): 0}

	_, err := c.TryAcquireSlot(ctx, "g", n)
	require.ErrorIs(t, err, ErrNoFreeSlot)
	advanceTo(clk, t0.Add(ttl))
	_, err = c.TryAcquireSlot(ctx, "g", n)
	require.ErrorIs(t, err, ErrNoFreeSlot, "slots 64..127 were seen unchanged only since %s, not for a TTL", renewedAt)
	advanceTo(clk, renewedAt.Add(ttl))
	l, err := c.TryAcquireSlot(ctx, "g", n)
	require.NoError(t, err, "slots 64..127 unchanged for a full TTL")
	require.True(t, l.Slot() >= 64 && l.Slot() < 128, "slot %d", l.Slot())
	release(t, l)
}

// takeDirect makes owner the holder of slot, with the next token and version, as a rival's
// acquisition would.
func takeDirect(t *testing.T, db *dynamodb.Client, table, group string, slot int, owner string) {
	t.Helper()
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK(group), slot),
		UpdateExpression:         aws.String("SET #o = :o, #tok = #tok + :one, version = version + :one, released = :f, expires_at = :exp"),
		ExpressionAttributeNames: map[string]string{"#o": attrOwner, "#tok": attrToken},
		ExpressionAttributeValues: map[string]typesAV{":o": avS(owner), ":one": avN(1), ":f": avB(false),
			":exp": avT(time.Now().Add(time.Hour))}})
	require.NoError(t, err)
}

// A sweep whose window's free slots were all taken by others before its writes landed goes on to
// the next windows (as a whole-group round tries its other free slots), so TryAcquireSlot says
// ErrNoFreeSlot only after losing two races or finding no free slot anywhere.
func TestSweepGoesOnAfterLosingAWindow(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n = 130
	heldGroup(t, db, table, "g", n)
	releaseDirect(t, db, table, "g", 5)
	releaseDirect(t, db, table, "g", 129)
	var rivalled atomic.Bool
	hooked := before(db, ddbfault.OpUpdateItem, func(in *dynamodb.UpdateItemInput) {
		if getN(in.Key, attrSK) == 5 && !rivalled.Swap(true) {
			takeDirect(t, db, table, "g", 5, "rival")
		}
	})
	c, err := New(hooked, table, WithOwner("standby"))
	require.NoError(t, err)
	c.cursor = map[string]int{groupPK("g"): 0}
	l, err := c.TryAcquireSlot(ctx, "g", n)
	require.NoError(t, err, "slot 129 was free all along")
	require.True(t, rivalled.Load())
	require.Equal(t, 129, l.Slot())
	release(t, l)
}

// A standby whose first round failed (DynamoDB unreachable for a moment) sweeps the group at its
// next round: the first round that reads anything looks at every window.
func TestStandbySweepsAfterFailedFirstRound(t *testing.T) {
	db, table := lockTable(t)
	const n = 130
	heldGroup(t, db, table, "g", n)
	releaseDirect(t, db, table, "g", 129)
	// Its first Query fails.
	hooked := ddbfault.New(db)
	var failed atomic.Bool
	hooked.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if !failed.Swap(true) {
			return nil, errInjected
		}
		return send(ctx, call.In)
	}, ddbfault.OpQuery)
	clk := clock.NewFake(time.Now().Truncate(time.Millisecond)) // heldGroup's leases are an hour long from now
	c, ev := newClient(t, hooked, table, timingOpts(clk, "standby")...)
	c.cursor = map[string]int{groupPK("g"): 0}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := standby(ctx, c, "g", n)
	waits := 0
	for {
		select {
		case wake := <-ev.standby:
			waits++
			advanceTo(clk, wake)
			continue
		case got := <-res:
			require.NoError(t, got.err)
			require.Equal(t, 129, got.lease.Slot())
			require.Equal(t, 1, waits, "one wait after the failed round, then a sweep finds slot 129")
			release(t, got.lease)
		case <-time.After(failsafe):
			t.Fatal("timed out waiting for the standby")
		}
		return
	}
}

// A poll that reads one window still settles an acquisition write of ours, in another window,
// whose outcome stayed unknown and that landed later: it is adopted, not left held by nobody.
func TestWindowedPollAdoptsLateLandingOutsideWindow(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n = 130
	heldGroup(t, db, table, "g", n)
	releaseDirect(t, db, table, "g", 5)
	late := newLateWrite(db)
	c, err := New(late, table, WithOwner("a"))
	require.NoError(t, err)
	c.cursor = map[string]int{groupPK("g"): 0}
	late.arm()
	_, err = c.TryAcquireSlot(ctx, "g", n)
	require.ErrorIs(t, err, errInjected, "the outcome of a's write on slot 5 is unknown to a")
	require.NoError(t, late.deliver(), "the write lands late")

	c.cursor[groupPK("g")] = 1 // the next poll reads slots 64..127 only
	tg, err := c.slotTarget("g", n, nil)
	require.NoError(t, err)
	l, err := c.acquireRound(ctx, tg)
	require.NoError(t, err, "the landed write is adopted")
	require.Equal(t, 5, l.Slot())
	require.Equal(t, int64(2), l.Token())
	require.Zero(t, late.unsettled(c))
	release(t, l)
}

// A poll of a window that does not hold the meta item still reads it: a worker with another n
// is refused.
func TestWindowedPollChecksMeta(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	heldGroup(t, db, table, "g", 200)
	releaseDirect(t, db, table, "g", 70)
	c, err := New(db, table, WithOwner("other-n"))
	require.NoError(t, err)
	c.cursor = map[string]int{groupPK("g"): 1} // slots 64..127, where slot 70 is free
	tg, err := c.slotTarget("g", 130, nil)
	require.NoError(t, err)
	_, err = c.acquireRound(ctx, tg)
	var gm *GroupMismatchError
	require.ErrorAs(t, err, &gm)
	require.Equal(t, "n", gm.Field)
	require.True(t, getB(rawItem(t, db, table, groupPK("g"), 70), attrReleased), "slot 70 untouched")
}

// finishDirect marks slots lo..hi-1 finished.
func finishDirect(t *testing.T, db *dynamodb.Client, table, group string, lo, hi int) {
	t.Helper()
	for s := lo; s < hi; s++ {
		_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK(group), s),
			UpdateExpression: aws.String("SET finished = :t"), ExpressionAttributeValues: map[string]typesAV{":t": avB(true)}})
		require.NoError(t, err)
	}
}

// A poll whose window is all finished (a job winding down) reads on to the next window with an
// unfinished slot rather than the whole group: its cost stays bounded while slots finish.
func TestWindowedPollSkipsFinishedWindow(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n = 300
	heldGroup(t, db, table, "g", n)
	finishDirect(t, db, table, "g", 0, windowSize)
	cdb := newCapacityDB(db)
	c, err := New(cdb, table, WithOwner("standby"))
	require.NoError(t, err)
	c.cursor = map[string]int{groupPK("g"): 0}
	tg, err := c.slotTarget("g", n, nil)
	require.NoError(t, err)
	_, err = c.acquireRound(ctx, tg)
	require.ErrorIs(t, err, ErrNoFreeSlot)
	require.LessOrEqual(t, cdb.items.Load(), int64(2*windowSize+1), "window 0 (all finished, and the meta item), then window 1")
	require.Equal(t, 2, c.cursor[groupPK("g")], "the next poll reads window 2")
}

// A skew-immune standby that sees each window only every ceil(n/windowSize) polls takes a slot
// only once it has watched the slot's version unchanged for a full TTL: never while the holder
// renews, and not until a TTL after the holder's last renewal.
func TestSkewImmuneWindowedStandby(t *testing.T) {
	db, table := lockTable(t)
	const n = 130
	heldGroup(t, db, table, "g", n)
	held := []int{10, 70, 129} // one unfinished slot per window
	for lo, s := 0, 0; s <= len(held); s++ {
		hi := n
		if s < len(held) {
			hi = held[s]
		}
		finishDirect(t, db, table, "g", lo, hi)
		lo = hi + 1
	}
	clk := clock.NewFake(t0)
	c, ev := newClient(t, db, table, append(timingOpts(clk, "standby"), WithSkewImmune())...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := standby(ctx, c, "g", n)
	lastRenew, crash := t0, t0.Add(20*time.Second)
	for {
		select {
		case wake := <-ev.standby:
			// The holder renews every slot each heartbeat until it crashes.
			for r := lastRenew.Add(hb); !r.After(wake) && !r.After(crash); r = r.Add(hb) {
				advanceTo(clk, r)
				for _, s := range held {
					bumpVersions(t, db, table, "g", s, s+1)
				}
				lastRenew = r
			}
			advanceTo(clk, wake)
			continue
		case got := <-res:
			require.NoError(t, got.err)
			require.Contains(t, held, got.lease.Slot())
			at := got.lease.AcquiredAt()
			require.False(t, at.Before(lastRenew.Add(ttl)), "taken at %s, last renewal at %s", at, lastRenew)
			require.False(t, at.After(lastRenew.Add(ttl+4*poll)), "taken at %s: each window is seen every 3 polls", at)
			release(t, got.lease)
		case <-time.After(failsafe):
			t.Fatal("timed out waiting for the standby")
		}
		return
	}
}

// A sweep that finds nothing free and ends on an all-finished window does not read the group a
// second time when it has seen unfinished slots: the group is not finished.
func TestSweepEndingOnFinishedWindowReadsOnce(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n = 200 // windows 0..63, 64..127, 128..191, 192..199
	heldGroup(t, db, table, "g", n)
	finishDirect(t, db, table, "g", 192, n)
	cdb := newCapacityDB(db)
	c, err := New(cdb, table, WithOwner("standby"))
	require.NoError(t, err)
	c.cursor = map[string]int{groupPK("g"): 0}
	_, err = c.TryAcquireSlot(ctx, "g", n)
	require.ErrorIs(t, err, ErrNoFreeSlot)
	require.Equal(t, int64(n+1), cdb.items.Load(), "every slot and the meta item, once")
}
