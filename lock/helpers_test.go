package lock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/clock"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

// t0 is ms-aligned, as expires_at is stored in ms.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// failsafe bounds every wait on a signal, so a bug fails the test instead of hanging it.
const failsafe = 20 * time.Second

// lockTable creates a fresh lock table with lock.CreateTable and deletes it after the test.
func lockTable(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	db := ddbtest.Client(t)
	name := ddbtest.TableName(t, "lock")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, CreateTable(ctx, db, name))
	ddbtest.DeleteOnCleanup(t, db, name)
	return db, name
}

var errInjected = errors.New("injected transport error")

// faultyDB is a client over the lock table that counts calls, can drop writes (a holder cut off
// from DynamoDB, or a crashed one), can fail an UpdateItem after the server applied it (a lost
// response), and can fail GetItems without reaching the server (the settling re-read of a renew
// whose answer was lost).
type faultyDB struct {
	DynamoDBClient
	calls            atomic.Int64
	dropWrites       atomic.Bool
	failAfterUpdates atomic.Int32 // this many next UpdateItems are applied but report an error
	updatesDelivered atomic.Int64
	failGets         atomic.Int32 // this many next GetItems fail, uncounted, without being sent
}

func newFaultyDB(db ddbfault.Next) *faultyDB {
	fc := ddbfault.New(db)
	f := &faultyDB{DynamoDBClient: fc}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if call.Op == ddbfault.OpGetItem {
			if f.failGets.Add(-1) >= 0 {
				return nil, errInjected
			}
			f.failGets.Store(0)
		}
		f.calls.Add(1)
		if call.Op == ddbfault.OpGetItem || call.Op == ddbfault.OpQuery {
			return send(ctx, call.In)
		}
		if f.dropWrites.Load() {
			return nil, errInjected
		}
		out, err := send(ctx, call.In)
		if err == nil && call.Op == ddbfault.OpUpdateItem {
			f.updatesDelivered.Add(1)
			if f.failAfterUpdates.Add(-1) >= 0 {
				return nil, errInjected
			}
			f.failAfterUpdates.Store(0)
		}
		return out, err
	}, ddbfault.OpGetItem, ddbfault.OpQuery, ddbfault.OpPutItem, ddbfault.OpUpdateItem)
	return f
}

// before is a client over db that calls f with each request of op before sending it.
func before[In any](db ddbfault.Next, op string, f func(in *In)) *ddbfault.Client {
	fc := ddbfault.New(db)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		f(call.In.(*In))
		return send(ctx, call.In)
	}, op)
	return fc
}

// dropAllOld is a hook that hides the item DynamoDB returns with a failed condition, so the
// caller must re-read.
func dropAllOld(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
	out, err := send(ctx, call.In)
	if cf, ok := conditionFailed(err); ok {
		cf.Item = nil
	}
	return out, err
}

// events collects the test hooks' signals of one client.
type events struct {
	standby chan time.Time // a standby's wake-up time
	renewed chan string    // a renew's outcome
}

func newClient(t testing.TB, db DynamoDBClient, table string, opts ...Option) (*Client, *events) {
	t.Helper()
	c, err := New(db, table, opts...)
	require.NoError(t, err)
	ev := &events{standby: make(chan time.Time, 64), renewed: make(chan string, 64)}
	c.hooks.standby = func(_ string, wake time.Time) { ev.standby <- wake }
	c.hooks.renewed = func(_ *Lease, outcome string) { ev.renewed <- outcome }
	return c, ev
}

func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(failsafe):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func waitDone(t testing.TB, l *Lease, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(failsafe):
		t.Fatalf("timed out waiting for %s", what)
	}
}

type acquired struct {
	lease *Lease
	err   error
}

// standby runs AcquireSlot on its own goroutine; the result arrives on the returned channel.
func standby(ctx context.Context, c *Client, group string, n int, opts ...AcquireOption) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := c.AcquireSlot(ctx, group, n, opts...)
		ch <- acquired{l, err}
	}()
	return ch
}

// advanceTo moves the fake clock forward to at (never backwards).
func advanceTo(clk *clock.Fake, at time.Time) {
	if d := at.Sub(clk.Now()); d > 0 {
		clk.Advance(d)
	}
}

// rawItem reads an item as stored, for before/after comparisons.
func rawItem(t testing.TB, db *dynamodb.Client, table, pk string, sk int) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: key(pk, sk), ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return out.Item
}

func release(t testing.TB, ls ...*Lease) {
	t.Helper()
	for _, l := range ls {
		require.NoError(t, l.Release(context.Background()))
	}
}

// heldSlots counts the group's slots that c sees held.
func heldSlots(t testing.TB, c *Client, group string) int {
	t.Helper()
	st, err := c.GroupStatus(context.Background(), group)
	require.NoError(t, err)
	held := 0
	for _, s := range st.Slots {
		if s.Held {
			held++
		}
	}
	return held
}

// counted is client a on a fresh lock table and a fake clock, its calls counted by f.
type counted struct {
	db    *dynamodb.Client
	table string
	f     *faultyDB
	a     *Client
	clk   *clock.Fake
}

func countedClient(t *testing.T) counted {
	t.Helper()
	k := counted{clk: clock.NewFake(t0)}
	k.db, k.table = lockTable(t)
	k.f = newFaultyDB(k.db)
	k.a, _ = newClient(t, k.f, k.table, timingOpts(k.clk, "a")...)
	return k
}

// holders is two clients on a fresh lock table (fake clocks), each holding a slot of group "g"
// of 2 slots until the test ends.
type holders struct {
	db     *dynamodb.Client
	table  string
	a, b   *Client
	la, lb *Lease
}

func twoHolders(t *testing.T, ownerA, ownerB string) holders {
	t.Helper()
	ctx := context.Background()
	h := holders{}
	h.db, h.table = lockTable(t)
	h.a, _ = newClient(t, h.db, h.table, WithClock(clock.NewFake(t0)), WithOwner(ownerA))
	h.b, _ = newClient(t, h.db, h.table, WithClock(clock.NewFake(t0)), WithOwner(ownerB))
	var err error
	h.la, err = h.a.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	h.lb, err = h.b.TryAcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	t.Cleanup(func() { release(t, h.la, h.lb) })
	return h
}
