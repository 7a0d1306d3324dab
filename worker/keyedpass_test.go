package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/scan"
)

// Keyed passes (keyedpass.go): a once-job whose pass leaves a few items for another pass reads
// only those items again, by key, instead of scanning its share once per retry.

// sourceReads records, in order, the Scan and BatchGetItem calls a worker makes on the source
// table.
type sourceReads struct {
	mu  sync.Mutex
	ops []string
}

func recordSourceReads(f *fixture) (*ddbfault.Client, *sourceReads) {
	fc := ddbfault.New(f.db)
	r := &sourceReads{}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if len(call.Tables) > 0 && call.Tables[0] == f.table {
			r.mu.Lock()
			r.ops = append(r.ops, call.Op)
			r.mu.Unlock()
		}
		return send(ctx, call.In)
	}, ddbfault.OpScan, ddbfault.OpBatchGetItem)
	return fc, r
}

// scansAfterKeyedRead counts the Scans made after the first BatchGetItem, and the BatchGetItems.
func (r *sourceReads) scansAfterKeyedRead() (scans, gets int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range r.ops {
		switch {
		case op == ddbfault.OpBatchGetItem:
			gets++
		case gets > 0:
			scans++
		}
	}
	return scans, gets
}

func (r *sourceReads) count(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, o := range r.ops {
		if o == op {
			n++
		}
	}
	return n
}

// failingFirst fails the attempts of items below fails[id] (1: the first attempt) and records
// every call.
func failingFirst(hc *handlerCalls, fails map[string]int) Handler {
	return func(_ context.Context, it Item) error {
		hc.record(it)
		if it.Attempt <= fails[it.Key["id"].(*types.AttributeValueMemberS).Value] {
			return fmt.Errorf("attempt %d fails", it.Attempt)
		}
		return nil
	}
}

// runRetrying runs a once-worker of c over f's n items with failingFirst(fails) and requires
// every item done in the end.
func runRetrying(t *testing.T, f *fixture, c Config, kind LedgerKind, n int, fails map[string]int) (*Worker, *handlerCalls) {
	t.Helper()
	w, err := New(c)
	require.NoError(t, err)
	hc := newHandlerCalls()
	require.NoError(t, runOnceWithin(t, w, failingFirst(hc, fails), time.Minute))
	for i := range n {
		requireStatus(t, f, kind, itemKey(i), StatusDone)
	}
	return w, hc
}

// TestOnceRetriesReadOnlyTheItemsLeft: three items of 300 fail their first attempt (one its
// second too); the retries read those items by key, and the share is scanned once. Before, each
// retry rescanned the share (three scans of 300 items for three items).
func TestOnceRetriesReadOnlyTheItemsLeft(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		for _, completeOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/completeOnly=%v", kind, completeOnly), func(t *testing.T) {
				const n = 300
				f := newFixture(t, n)
				fc, reads := recordSourceReads(f)
				c := completeOnlyOnce(f, kind)
				c.Client, c.CompleteOnly = fc, completeOnly
				fails := map[string]int{itemKey(0): 2, itemKey(150): 1, itemKey(299): 1}
				w, hc := runRetrying(t, f, c, kind, n, fails)
				for i := range n {
					require.Equal(t, fails[itemKey(i)]+1, hc.calls[itemKey(i)], "item %d", i)
				}
				scans, gets := reads.scansAfterKeyedRead()
				require.Zero(t, scans, "no scan after the items left were read by key")
				require.Equal(t, 2, gets, "one BatchGetItem per retry round: three items, then item 0")
				require.Equal(t, int64(3), w.Stats().Passes, "the scanned pass and two keyed passes")
			})
		}
	}
}

// TestManyItemsLeftRescanTheShare: when every item fails its first attempt, reading them all by
// key would cost more than scanning the share again (each read is billed a unit's half at least,
// the scan by bytes), so the worker rescans.
func TestManyItemsLeftRescanTheShare(t *testing.T) {
	const n = 60
	f := newFixture(t, n)
	fc, reads := recordSourceReads(f)
	c := completeOnlyOnce(f, LedgerInline)
	c.Client = fc
	fails := map[string]int{}
	for i := range n {
		fails[itemKey(i)] = 1
	}
	runRetrying(t, f, c, LedgerInline, n, fails)
	require.Zero(t, reads.count(ddbfault.OpBatchGetItem), "no item read by key")
	require.Greater(t, reads.count(ddbfault.OpScan), 1, "the share scanned again")
}

// TestKeyedPassStoppedLeavesARescan: a worker stopped while its keyed pass handles an item leaves
// the slot's checkpoint dirty, so the next worker rescans the share and handles the item. Had the
// stopped keyed pass saved its own clean state, the next worker would have marked the slot
// finished with the item never done.
func TestKeyedPassStoppedLeavesARescan(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 50
			f := newFixture(t, n)
			fc, reads := recordSourceReads(f)
			c := completeOnlyOnce(f, kind)
			c.Client, c.DrainTimeout, c.HandlerGrace = fc, 50*time.Millisecond, 50*time.Millisecond
			w, err := New(c)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stopped := make(chan struct{})
			var once sync.Once
			h := func(hctx context.Context, it Item) error {
				if it.Key["id"].(*types.AttributeValueMemberS).Value != itemKey(7) {
					return nil
				}
				if it.Attempt == 1 {
					return errors.New("the first attempt fails: a keyed pass follows")
				}
				once.Do(func() { close(stopped); cancel() }) // the worker stops during the keyed pass
				<-hctx.Done()
				return hctx.Err()
			}
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx, h) }()
			<-stopped
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
			require.Equal(t, 1, reads.count(ddbfault.OpBatchGetItem), "the stop came in the keyed pass")
			st := requireStatusIn(t, f, kind, itemKey(7))
			require.NotEqual(t, StatusDone, st.Status)

			w2, err := New(c)
			require.NoError(t, err)
			hc := newHandlerCalls()
			require.NoError(t, runOnceWithin(t, w2, func(_ context.Context, it Item) error { hc.record(it); return nil }, time.Minute))
			require.Equal(t, 1, hc.calls[itemKey(7)], "the next worker handled the item the stop interrupted")
			for i := range n {
				requireStatus(t, f, kind, itemKey(i), StatusDone)
			}
		})
	}
}

// requireStatusIn reads the state of item id.
func requireStatusIn(t *testing.T, f *fixture, kind LedgerKind, id string) ItemState {
	t.Helper()
	st, err := f.ledger(t, kind, "").State(context.Background(), skey(id))
	require.NoError(t, err)
	return st
}

// TestKeyedReadRefusedScansInstead: a worker whose role may not BatchGetItem the source table (a
// policy written before keyed passes) scans its share for the items left instead: the first
// keyed read is refused, nothing is lost, and it is not tried again.
func TestKeyedReadRefusedScansInstead(t *testing.T) {
	const n = 40
	f := newFixture(t, n)
	fc, reads := recordSourceReads(f)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if call.Tables[0] == f.table {
			return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "test: no BatchGetItem"}
		}
		return send(ctx, call.In)
	}, ddbfault.OpBatchGetItem)
	c := completeOnlyOnce(f, LedgerTable)
	c.Client, c.MaxAttempts = fc, 4
	fails := map[string]int{itemKey(3): 3}
	_, hc := runRetrying(t, f, c, LedgerTable, n, fails)
	require.Equal(t, 4, hc.calls[itemKey(3)])
	require.Equal(t, 1, reads.count(ddbfault.OpBatchGetItem), "refused once, then not tried again")
	scans, _ := reads.scansAfterKeyedRead()
	require.Positive(t, scans, "the share scanned for the items left")
}

// TestKeyedReadThrottledReadsAgain: a keyed read that fails on its way (throttled past the SDK's
// retries) is made again after a backoff, with the same keys, instead of scanning the share: before,
// any failed keyed read meant a rescan at once.
func TestKeyedReadThrottledReadsAgain(t *testing.T) {
	const n = 300
	f := newFixture(t, n)
	fc, reads := recordSourceReads(f)
	var throttle onceFlag
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if call.Tables[0] == f.table && throttle.first() {
			return nil, &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "test: throttled"}
		}
		return send(ctx, call.In)
	}, ddbfault.OpBatchGetItem)
	c := completeOnlyOnce(f, LedgerInline)
	c.Client = fc
	fails := map[string]int{itemKey(11): 1, itemKey(12): 1}
	_, hc := runRetrying(t, f, c, LedgerInline, n, fails)
	require.True(t, throttle.used.Load())
	scans, gets := reads.scansAfterKeyedRead()
	require.Zero(t, scans, "no rescan after the throttled keyed read")
	require.Equal(t, 2, gets, "the throttled read, then the same keys again")
	require.Equal(t, 2, hc.calls[itemKey(11)])
}

// TestKeyedReadFilterModeProjection: in filter mode with a Projection, the items a keyed pass
// reads carry the partition attribute as the scanned ones do (the scan adds it to its
// projection), so a handler sees the same attributes in either pass.
func TestKeyedReadFilterModeProjection(t *testing.T) {
	const n = 200
	f := newFixture(t, n)
	f.seed(t, 0, n, func(i int, item map[string]types.AttributeValue) {
		item["tenant"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("t%d", i%7)}
	})
	fc, reads := recordSourceReads(f)
	c := completeOnlyOnce(f, LedgerInline)
	c.Client, c.Mode, c.PartitionAttr, c.Projection = fc, scan.ModeFilter, "tenant", []string{"n"}
	w, err := New(c)
	require.NoError(t, err)
	var mu sync.Mutex
	tenants := map[int]bool{} // attempt -> tenant seen
	h := func(_ context.Context, it Item) error {
		if it.Key["id"].(*types.AttributeValueMemberS).Value != itemKey(5) {
			return nil
		}
		mu.Lock()
		_, ok := it.Attrs["tenant"]
		tenants[it.Attempt] = ok
		mu.Unlock()
		if it.Attempt == 1 {
			return errors.New("the first attempt fails: a keyed pass follows")
		}
		return nil
	}
	require.NoError(t, runOnceWithin(t, w, h, time.Minute))
	require.Equal(t, 1, reads.count(ddbfault.OpBatchGetItem), "the retry was read by key")
	require.Equal(t, map[int]bool{1: true, 2: true}, tenants, "the partition attribute in the scanned pass and the keyed one")
}

// TestKeyedPassFinishesAnItemThatMovedSlot: in filter mode, an item whose partition attribute
// moves it to another slot after its slot's pass left it for another is still handled by the
// keyed pass, when the other slot has finished already. 3890160 dropped such items from keyed
// passes, as a scan drops them: the job then ended with the item in retry (the other slot's pass
// was over), depending on which slot finished first; this test orders the slots so that it is.
func TestKeyedPassFinishesAnItemThatMovedSlot(t *testing.T) {
	const n = 60
	f := newFixture(t, n)
	tenantOf := map[int]string{} // slot -> a tenant value in that slot's partition
	for i := 0; len(tenantOf) < 2; i++ {
		v := fmt.Sprintf("tenant-%d", i)
		if slot := scan.Partition(&types.AttributeValueMemberS{Value: v}, 2); tenantOf[slot] == "" {
			tenantOf[slot] = v
		}
	}
	f.seed(t, 0, n, func(i int, item map[string]types.AttributeValue) {
		item["tenant"] = &types.AttributeValueMemberS{Value: tenantOf[i%2]}
	})
	c := completeOnlyOnce(f, LedgerInline)
	c.Workers, c.Mode, c.PartitionAttr, c.NoSteal = 2, scan.ModeFilter, "tenant", true

	// Worker a takes a slot first; b takes the other, finishes it and exits while a's first item
	// waits. Then a's item moves to b's slot and fails its first attempt.
	acquired := make(chan int, 1)
	ca := c
	ca.Hooks.OnLease = func(ev LeaseEvent) {
		if ev.Kind == LeaseAcquired {
			select {
			case acquired <- ev.Slot:
			default:
			}
		}
	}
	a, err := New(ca)
	require.NoError(t, err)
	b, err := New(c)
	require.NoError(t, err)
	bDone := make(chan error, 1)
	var moved atomic.Pointer[string]
	var mu sync.Mutex
	handled := map[string]int{}
	ha := func(ctx context.Context, it Item) error {
		id := it.Key["id"].(*types.AttributeValueMemberS).Value
		mu.Lock()
		handled[id]++
		mu.Unlock()
		if !moved.CompareAndSwap(nil, &id) && *moved.Load() != id || it.Attempt > 1 {
			return nil
		}
		if err := <-bDone; err != nil {
			return Permanent(fmt.Errorf("b: %w", err))
		}
		_, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(f.table), Key: it.Key, UpdateExpression: aws.String("SET tenant = :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberS{Value: tenantOf[1-it.Slot]}},
		})
		if err != nil {
			return Permanent(err)
		}
		return errors.New("the first attempt fails; the item has moved to the finished slot meanwhile")
	}
	aDone := make(chan error, 1)
	go func() { aDone <- runOnceWithin(t, a, ha, time.Minute) }()
	<-acquired
	go func() { bDone <- runOnceWithin(t, b, func(context.Context, Item) error { return nil }, time.Minute) }()
	require.NoError(t, <-aDone)
	id := *moved.Load()
	requireStatus(t, f, LedgerInline, id, StatusDone)
	require.Equal(t, 2, handled[id], "its first attempt, then the keyed pass's")
}
