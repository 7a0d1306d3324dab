package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/dynapart/dynapart/ddbfault"
	"github.com/stretchr/testify/require"
)

// cutHolder is the client of a slot holder cut off DynamoDB: once cut, its lease writes fail (so
// its lease ends by its own clock) and its first completion is held until a standby has taken the
// slot over, and then until the write's own context ends (at most a bound): a request whose
// context is done is never sent (as with the SDK). Every ledger write that would be sent after the
// takeover is counted.
type cutHolder struct {
	fc         *ddbfault.Client
	leaseTable string
	cut        atomic.Bool
	tookOver   chan struct{} // closed when the standby holds the slot
	resolved   chan struct{} // closed when the held completion was sent or dropped
	held       onceFlag
	sentAfter  atomic.Int64 // ledger writes sent after the takeover
}

// holdBound is how long the held completion waits for its context to end after the takeover.
const holdBound = 3 * time.Second

func newCutHolder(f *fixture) *cutHolder {
	c := &cutHolder{fc: ddbfault.New(f.db), leaseTable: f.leaseTable, tookOver: make(chan struct{}), resolved: make(chan struct{})}
	c.fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		if aws.ToString(in.TableName) == c.leaseTable {
			if c.cut.Load() && !closed(c.resolved) {
				return nil, errTransient
			}
			return send(ctx, in)
		}
		if isTransition(in, ":done") && c.held.first() {
			c.cut.Store(true)
			return c.hold(ctx, call, send)
		}
		return c.sendCounted(ctx, call, send)
	}, ddbfault.OpUpdateItem)
	c.fc.OnCall(c.sendCounted, ddbfault.OpTransactWriteItems, ddbfault.OpBatchExecuteStatement)
	return c
}

// hold keeps the completion until the takeover, then until its context ends (bounded).
func (c *cutHolder) hold(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
	defer close(c.resolved)
	select {
	case <-c.tookOver:
	case <-time.After(time.Minute):
		return nil, errTransient
	}
	select {
	case <-ctx.Done():
	case <-time.After(holdBound):
	}
	return c.sendCounted(ctx, call, send)
}

// sendCounted sends a ledger write unless its context is done, counting it when the slot was
// already taken over.
func (c *cutHolder) sendCounted(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if closed(c.tookOver) {
		c.sentAfter.Add(1)
	}
	return send(ctx, call.In)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestLedgerWritesEndWithTheLease: a slot holder is cut off while its completion write is in
// flight; its lease ends by its clock and a standby takes the slot over. The held completion (and
// any other ledger write of the old holder) must not be sent afterwards: it is cancelled with the
// lease, its outcome settled by reads only. The standby reclaims the item at once by its newer
// token and completes it.
func TestLedgerWritesEndWithTheLease(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerTable, LedgerInline} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 1)
			cut := newCutHolder(f)
			standby := ddbfault.New(f.db)
			standby.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if isTransition(call.In.(*dynamodb.UpdateItemInput), ":until") {
					<-cut.resolved // the standby claims only once the old holder's completion is decided
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem)
			acquired := make(chan struct{})
			var acquiredOnce, tookOverOnce sync.Once
			var calls sync.Map // owner -> *atomic.Int64

			base := fastTimings(f.config(kind))
			base.Workers, base.Once, base.ClaimTTL = 1, true, time.Minute
			ca := base
			ca.Client, ca.Owner = workerClient(cut.fc), "holder"
			ca.Hooks.OnLease = func(e LeaseEvent) {
				if e.Kind == LeaseAcquired {
					acquiredOnce.Do(func() { close(acquired) })
				}
			}
			cb := base
			cb.Client, cb.Owner = workerClient(standby), "standby"
			cb.Hooks.OnLease = func(e LeaseEvent) {
				if e.Kind == LeaseAcquired {
					tookOverOnce.Do(func() { close(cut.tookOver) })
				}
			}
			handler := func(owner string) Handler {
				return func(context.Context, Item) error {
					n, _ := calls.LoadOrStore(owner, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
					return nil
				}
			}
			wa, err := New(ca)
			require.NoError(t, err)
			wb, err := New(cb)
			require.NoError(t, err)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			errA := make(chan error, 1)
			go func() { errA <- wa.Run(ctx, handler("holder")) }()
			select {
			case <-acquired:
			case err := <-errA:
				t.Fatalf("the holder returned before taking the slot: %v", err)
			}
			require.NoError(t, wb.Run(ctx, handler("standby")))
			if err := <-errA; err != nil && !errors.Is(err, context.Canceled) {
				require.NoError(t, err)
			}

			require.True(t, cut.held.used.Load(), "the holder's completion was never held")
			require.Zero(t, cut.sentAfter.Load(), "ledger writes of the old holder sent after the takeover")
			st := requireStatus(t, f, kind, itemKey(0), StatusDone)
			require.Equal(t, "standby", st.Owner, "the item must be completed under the standby's claim: %+v", st)
			for _, owner := range []string{"holder", "standby"} {
				n, ok := calls.Load(owner)
				require.True(t, ok, "%s never ran the handler", owner)
				require.EqualValues(t, 1, n.(*atomic.Int64).Load(), owner)
			}
		})
	}
}
