package lock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/clock"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// lateWrite holds back the next acquisition write (a Put or Update that sets acquired_at) when
// armed: the caller gets a transport error at once and the write reaches DynamoDB only when the
// test calls deliver — a request delayed in the network past the client's timeout and past the
// read that settles its outcome.
type lateWrite struct {
	DynamoDBClient
	mu      sync.Mutex
	armed   bool
	deliver func() error
}

func newLateWrite(db ddbfault.Next) *lateWrite {
	fc := ddbfault.New(db)
	l := &lateWrite{DynamoDBClient: fc}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		acquisition := false
		switch in := call.In.(type) {
		case *dynamodb.PutItemInput:
			_, acquisition = in.Item[attrAcquiredAt]
		case *dynamodb.UpdateItemInput:
			acquisition = in.ExpressionAttributeNames["#acq"] == attrAcquiredAt
		}
		if acquisition && l.hold(func() error {
			_, err := send(context.Background(), call.In)
			return err
		}) {
			return nil, errInjected
		}
		return send(ctx, call.In)
	}, ddbfault.OpPutItem, ddbfault.OpUpdateItem)
	return l
}

func (l *lateWrite) hold(send func() error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.armed {
		return false
	}
	l.armed, l.deliver = false, send
	return true
}

func (l *lateWrite) arm() { l.mu.Lock(); l.armed = true; l.mu.Unlock() }

func (l *lateWrite) unsettled(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.unsettled)
}

// An acquisition write whose outcome stayed unknown and that lands later is not a phantom lease:
// the next round of the same client adopts it while it is valid, releases it (free at once) when
// it has expired by the client's clock, and forgets it when another client got there first.
func TestLateLandingAcquisition(t *testing.T) {
	ctx := context.Background()
	db, table := lockTable(t)
	direct := ddbtest.Client(t)
	// start makes a's acquisition of group whose write is held back (a sees a transport error),
	// with b a client of another owner on the same clock.
	start := func(t *testing.T, group string) (clk *clock.Fake, late *lateWrite, a *Client, aev *events, b *Client) {
		t.Helper()
		clk = clock.NewFake(t0)
		late = newLateWrite(db)
		a, aev = newClient(t, late, table, timingOpts(clk, "a")...)
		b, _ = newClient(t, direct, table, timingOpts(clk, "b")...)
		late.arm()
		_, err := a.TryAcquireSlot(ctx, group, 1)
		require.ErrorIs(t, err, errInjected, "the outcome is unknown to a")
		require.Equal(t, 1, late.unsettled(a))
		return clk, late, a, aev, b
	}

	t.Run("still valid: adopted", func(t *testing.T) {
		clk, late, a, aev, b := start(t, "valid")
		require.NoError(t, late.deliver(), "the write lands late")
		_, err := b.TryAcquireSlot(ctx, "valid", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot, "the landed write holds the slot")

		l, err := a.TryAcquireSlot(ctx, "valid", 1)
		require.NoError(t, err, "a adopts its landed write")
		require.Equal(t, int64(1), l.Token())
		require.Zero(t, late.unsettled(a))
		clk.Advance(hb)
		require.Equal(t, "ok", recv(t, aev.renewed, "the adopted lease renews"))
		require.NoError(t, l.Release(ctx))
		lb, err := b.TryAcquireSlot(ctx, "valid", 1)
		require.NoError(t, err)
		require.Equal(t, int64(2), lb.Token())
		release(t, lb)
	})

	t.Run("expired by the holder's clock: released at once", func(t *testing.T) {
		clk, late, a, _, b := start(t, "expired")
		require.NoError(t, late.deliver())
		clk.Advance(ttl - time.Second) // past expires_at - margin, not past expires_at + skew
		_, err := b.TryAcquireSlot(ctx, "expired", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot, "for anyone else the landed lease is still held")

		l, err := a.TryAcquireSlot(ctx, "expired", 1)
		require.NoError(t, err, "a released the expired write and took the slot afresh")
		require.Equal(t, int64(2), l.Token())
		require.False(t, l.TookOver(), "taken from a released lease")
		require.Equal(t, clk.Now().Add(ttl), l.ExpiresAt())
		release(t, l)
	})

	t.Run("overtaken: forgotten", func(t *testing.T) {
		_, late, a, _, b := start(t, "overtaken")
		lb, err := b.TryAcquireSlot(ctx, "overtaken", 1)
		require.NoError(t, err)
		_, cf := conditionFailed(late.deliver())
		require.True(t, cf, "the late write finds b's item and fails its condition")
		_, err = a.TryAcquireSlot(ctx, "overtaken", 1)
		require.ErrorIs(t, err, ErrNoFreeSlot)
		require.Zero(t, late.unsettled(a), "a write that can no longer land is forgotten")
		require.Equal(t, "b", getS(rawItem(t, direct, table, lb.pk, lb.slot), attrOwner))
		release(t, lb)
	})
}
