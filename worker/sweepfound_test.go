package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// The tests in this file pin what the deterministic fault sweep (internal/sweep) found after the
// holes of issue 12 were closed.

// handlerCalls counts handler calls per item and remembers the attempts the handler was told.
type handlerCalls struct {
	mu       sync.Mutex
	calls    map[string]int
	attempts map[string][]int
}

func newHandlerCalls() *handlerCalls {
	return &handlerCalls{calls: map[string]int{}, attempts: map[string][]int{}}
}

func (h *handlerCalls) record(it Item) {
	id := it.Key["id"].(*types.AttributeValueMemberS).Value
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[id]++
	h.attempts[id] = append(h.attempts[id], it.Attempt)
}

// TestCompleteOnlyTellsTheAttempt: in complete-only mode a handler is told the attempt it makes, so
// one that fails its first attempt succeeds on its second, instead of failing every attempt (the
// item was dead-lettered with "attempt 1" three times).
func TestCompleteOnlyTellsTheAttempt(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 3
			f := newFixture(t, n)
			w, err := New(completeOnlyOnce(f, kind))
			require.NoError(t, err)
			hc := newHandlerCalls()
			require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error {
				hc.record(it)
				if it.Attempt == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			}, time.Minute))
			for i := range n {
				requireStatus(t, f, kind, itemKey(i), StatusDone)
				require.Equal(t, []int{1, 2}, hc.attempts[itemKey(i)], "item %d", i)
			}
		})
	}
}

// TestCompleteOnlyHandlesADoneItemNoMore: a later pass of a complete-only run does not call the
// handler again for items finished in an earlier pass (with the table ledger the scan cannot see
// the item's state, and every pass handled every item again).
func TestCompleteOnlyHandlesADoneItemNoMore(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 4
			f := newFixture(t, n)
			w, err := New(completeOnlyOnce(f, kind))
			require.NoError(t, err)
			hc := newHandlerCalls()
			require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error {
				hc.record(it)
				if it.Key["id"].(*types.AttributeValueMemberS).Value == itemKey(0) && it.Attempt == 1 {
					return errors.New("item 0 fails once: a second pass runs")
				}
				return nil
			}, time.Minute))
			require.Equal(t, 2, hc.calls[itemKey(0)])
			for i := 1; i < n; i++ {
				requireStatus(t, f, kind, itemKey(i), StatusDone)
				require.Equal(t, 1, hc.calls[itemKey(i)], "item %d handled again in the second pass", i)
			}
		})
	}
}

// TestClaimRefusedWithoutOldImageSettled: a claim lands, its answer is lost, and the repeat fails
// its condition without the old item (a backend that ignores ALL_OLD, or a repeat sent without it).
// The worker must read the row, find its own claim and handle the item: no attempt used up, no
// item left claimed.
func TestClaimRefusedWithoutOldImageSettled(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 3
			f := newFixture(t, n)
			var lose onceFlag
			fc := &faulty{DynamoDBClient: f.db}
			fc.onUpdate = func(_ context.Context, in *dynamodb.UpdateItemInput, next func() (*dynamodb.UpdateItemOutput, error)) (*dynamodb.UpdateItemOutput, error) {
				if !isTransition(in, ":until") || !lose.first() {
					return next()
				}
				if _, err := next(); err != nil { // lands
					return nil, err
				}
				in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureNone
				return next() // the repeat meets the landed claim and brings no old item
			}
			c := f.config(kind)
			c.Client, c.Workers, c.Once, c.Concurrency, c.MaxAttempts = fc, 1, true, 1, 1
			c.ClaimTTL, c.PollInterval = 2*time.Second, 50*time.Millisecond
			requireEachHandledOnce(t, f, c, n, &lose)
		})
	}
}

// TestBatchClaimRefusedWithoutOldImageSettled: the same for a claim transaction whose repeat is
// cancelled with ConditionalCheckFailed reasons that carry no old items.
func TestBatchClaimRefusedWithoutOldImageSettled(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 8
			f := newFixture(t, n)
			var lose onceFlag
			fc := &faulty{DynamoDBClient: f.db}
			fc.onTx = func(_ context.Context, in *dynamodb.TransactWriteItemsInput, next func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
				if in.TransactItems[0].Update == nil || !isTransition(&dynamodb.UpdateItemInput{UpdateExpression: in.TransactItems[0].Update.UpdateExpression}, ":until") || !lose.first() {
					return next()
				}
				if _, err := next(); err != nil { // lands
					return nil, err
				}
				for _, it := range in.TransactItems {
					it.Update.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureNone
				}
				in.ClientRequestToken = nil
				return next() // a new transaction: cancelled, no old items
			}
			c := f.config(kind)
			c.Client, c.Workers, c.Once, c.Concurrency, c.MaxAttempts, c.BatchClaims = fc, 1, true, 4, 1, true
			c.ClaimTTL, c.PollInterval = 5*time.Second, 50*time.Millisecond
			c.Segments = 1 // the items in one page: one batch
			requireEachHandledOnce(t, f, c, n, &lose)
		})
	}
}

// requireEachHandledOnce runs a once-worker with c over the fixture's n items, after which the
// fault (lose) must have fired, and every item be done, with one attempt and one handler call.
func requireEachHandledOnce(t *testing.T, f *fixture, c Config, n int, lose *onceFlag) {
	t.Helper()
	w, err := New(c)
	require.NoError(t, err)
	hc := newHandlerCalls()
	require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error { hc.record(it); return nil }, time.Minute))
	require.True(t, lose.used.Load(), "the fault fired")
	for i := range n {
		st := requireStatus(t, f, c.Ledger, itemKey(i), StatusDone)
		require.Equal(t, 1, st.Attempts, "item %d: the claim never learned of used up no attempt", i)
		require.Equal(t, 1, hc.calls[itemKey(i)], "item %d", i)
	}
}

// completeOnlyOnce is a once-run of one complete-only worker with quick retries.
func completeOnlyOnce(f *fixture, kind LedgerKind) Config {
	c := f.config(kind)
	c.Workers, c.Once, c.CompleteOnly, c.MaxAttempts = 1, true, true, 3
	c.RetryBackoff, c.MaxRetryBackoff, c.PollInterval = 10*time.Millisecond, 20*time.Millisecond, 50*time.Millisecond
	return c
}
