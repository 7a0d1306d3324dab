package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/lock"
)

// freezable is a worker's client that, once frozen, holds every call until thawed, like the calls
// of a process stopped with SIGSTOP. It counts the writes that land after the thaw.
type freezable struct {
	DynamoDBClient
	mu     sync.Mutex
	gate   chan struct{} // closed by thaw; nil while not frozen
	thawed atomic.Bool
	landed atomic.Int64 // writes that succeeded after the thaw
	held   sync.Map     // id -> true: items whose UpdateItem (a claim or completion) the freeze held
}

func newFreezable(db ddbfault.Next) *freezable {
	fc := ddbfault.New(db)
	f := &freezable{DynamoDBClient: workerClient(fc)}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if f.wait() {
			f.hold(call.In)
		}
		out, err := send(ctx, call.In)
		switch call.Op {
		case ddbfault.OpPutItem, ddbfault.OpUpdateItem, ddbfault.OpTransactWriteItems, ddbfault.OpBatchExecuteStatement:
			f.wrote(err)
		}
		return out, err
	}, ddbfault.OpGetItem, ddbfault.OpQuery, ddbfault.OpScan, ddbfault.OpPutItem, ddbfault.OpUpdateItem, ddbfault.OpTransactWriteItems, ddbfault.OpBatchExecuteStatement)
	return f
}

func (f *freezable) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate == nil {
		f.gate = make(chan struct{})
	}
}

func (f *freezable) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.thawed.Store(true)
	close(f.gate)
}

// frozen reports a freeze not yet thawed.
func (f *freezable) frozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gate != nil && !f.thawed.Load()
}

// wait blocks while frozen and reports whether it did; it ignores ctx, as a stopped process
// notices nothing. A call is held when wait blocks it, not when a check before it saw the
// freeze: a call that entered between the two would be held unrecorded.
func (f *freezable) wait() bool {
	f.mu.Lock()
	g, thawed := f.gate, f.thawed.Load()
	f.mu.Unlock()
	if g == nil || thawed {
		return false
	}
	<-g
	return true
}

// hold records the item of a held UpdateItem (a claim or a completion).
func (f *freezable) hold(in any) {
	if u, ok := in.(*dynamodb.UpdateItemInput); ok {
		if id, ok := u.Key["id"].(*types.AttributeValueMemberS); ok {
			f.held.Store(id.Value, true)
		}
	}
}

func (f *freezable) wrote(err error) {
	if err == nil && f.thawed.Load() {
		f.landed.Add(1)
	}
}

// TestFrozenAcrossResize: worker A is frozen (its calls and handlers stop, as under SIGSTOP) in
// the middle of a once job; the group is scaled from 2 to 3 slots and the other workers finish
// the job (the new plan waits out A's lease). Thawed, A writes nothing: not a checkpoint, not a
// completion, not a slot. Every item ends done; only the items A's handlers held when it froze,
// and those whose completion it was about to send, are handled twice (a stopped process is a crash
// to the others: an item handled but not yet completed is handled again).
func TestFrozenAcrossResize(t *testing.T) {
	const items = 900
	f := newFixture(t, items)
	var calls sync.Map // id -> *atomic.Int64
	count := func(id string) {
		v, _ := calls.LoadOrStore(id, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	config := func(owner string, workers int, db DynamoDBClient) Config {
		c := fastTimings(f.config(LedgerInline))
		c.Client, c.Workers, c.Once, c.Owner = db, workers, true, owner
		c.ClaimTTL, c.PageSize, c.Segments, c.Concurrency = time.Second, 20, 24, 4
		return c
	}
	frozenA := newFreezable(f.db)
	froze := make(chan struct{})
	var inFlightAtFreeze sync.Map
	var aCalls atomic.Int64
	handlerA := func(_ context.Context, it Item) error {
		id := keyID(it.Key)
		count(id)
		if aCalls.Add(1) == 60 {
			frozenA.freeze()
			close(froze)
		}
		if frozenA.frozen() {
			inFlightAtFreeze.Store(id, true)
			frozenA.wait() // a stopped process's handlers stop too
		}
		return nil
	}
	handler := func(_ context.Context, it Item) error { count(keyID(it.Key)); return nil }

	a, err := New(config("a", 2, frozenA))
	require.NoError(t, err)
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(context.Background(), handlerA) }()
	var others sync.WaitGroup
	runOther := func(owner string, workers int) {
		w, err := New(config(owner, workers, f.db))
		require.NoError(t, err)
		others.Go(func() { require.NoError(t, runOnceWithin(t, w, handler, 90*time.Second), owner) })
	}
	runOther("b", 2)
	<-froze
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = locks.ResizeGroup(context.Background(), a.Config().Group, 3)
	require.NoError(t, err)
	runOther("c", 0)
	runOther("d", 0)
	others.Wait() // the job is finished without A

	frozenA.thaw()
	select {
	case err := <-aDone:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("A did not return after the thaw")
	}
	require.Zero(t, frozenA.landed.Load(), "a write of the frozen worker landed after the thaw")

	n := 0
	calls.Range(func(k, v any) bool {
		n++
		if c := v.(*atomic.Int64).Load(); c > 1 {
			_, inHandler := inFlightAtFreeze.Load(k)
			_, completing := frozenA.held.Load(k)
			require.True(t, inHandler || completing, "item %s handled %d times but A was neither handling nor completing it at the freeze", k, c)
			require.Equal(t, int64(2), c, "item %s: A's attempt and the one after its claim expired", k)
		}
		return true
	})
	require.Equal(t, items, n, "every item handled")
	sum, err := f.ledger(t, LedgerInline, "").(*InlineLedger).Summarize(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(items), sum.Done, fmt.Sprintf("%+v", sum))
}
