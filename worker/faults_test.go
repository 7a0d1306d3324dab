package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynapart/dynapart/ddbfault"
	"github.com/stretchr/testify/require"
)

// errTransient stands for a network error: the caller cannot tell whether the write landed.
var errTransient = errors.New("test: connection reset")

// once returns true the first time only.
type onceFlag struct{ used atomic.Bool }

func (o *onceFlag) first() bool { return o.used.CompareAndSwap(false, true) }

// isTransition reports whether an UpdateItem is the ledger transition that sets the given
// placeholder (":retryAt" for a retry, ":failed" for a dead letter, ":until" for a claim).
func isTransition(in *dynamodb.UpdateItemInput, placeholder string) bool {
	return strings.Contains(aws.ToString(in.UpdateExpression), "= "+placeholder)
}

// runOnceWithin runs w once and fails the test when Run does not return within d.
func runOnceWithin(t *testing.T, w *Worker, h Handler, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, h) }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("Run did not return within %s", d)
		return nil
	}
}

func requireStatus(t *testing.T, f *fixture, kind LedgerKind, id string, want Status) ItemState {
	t.Helper()
	st, err := f.ledger(t, kind, "").State(context.Background(), skey(id))
	require.NoError(t, err)
	require.Equal(t, want, st.Status, "item %s: %+v", id, st)
	return st
}

// TestRetryLostAnswerSettled: the retry write lands, its answer is lost and the SDK's repeat
// fails its condition. The once-run must not end with the item left in retry.
func TestRetryLostAnswerSettled(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 1)
			var lose onceFlag
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if isTransition(call.In.(*dynamodb.UpdateItemInput), ":retryAt") && lose.first() {
					if _, err := send(ctx, call.In); err != nil { // lands
						return nil, err
					}
					return send(ctx, call.In) // the SDK's repeat meets the landed write
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem)
			c := fastTimings(f.config(kind))
			c.Workers = 1
			c.Client, c.Once, c.MaxAttempts = workerClient(fc), true, 3
			w, err := New(c)
			require.NoError(t, err)
			var calls atomic.Int64
			err = runOnceWithin(t, w, func(context.Context, Item) error {
				if calls.Add(1) == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			}, time.Minute)
			require.NoError(t, err)
			require.True(t, lose.used.Load(), "the retry write was never made")
			requireStatus(t, f, kind, itemKey(0), StatusDone)
			require.EqualValues(t, 2, calls.Load())
		})
	}
}

// TestDeadLetterTransientErrorKept: the dead-letter write fails with a transient error. The
// once-run must not end with the item left claimed.
func TestDeadLetterTransientErrorKept(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 1)
			var fail onceFlag
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if isTransition(call.In.(*dynamodb.UpdateItemInput), ":failed") && fail.first() {
					return nil, errTransient // not sent
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem)
			c := fastTimings(f.config(kind))
			c.Workers = 1
			c.Client, c.Once, c.ClaimTTL = workerClient(fc), true, time.Second
			w, err := New(c)
			require.NoError(t, err)
			err = runOnceWithin(t, w, func(context.Context, Item) error {
				return Permanent(errors.New("bad item"))
			}, time.Minute)
			require.NoError(t, err)
			require.True(t, fail.used.Load(), "the dead-letter write was never made")
			requireStatus(t, f, kind, itemKey(0), StatusFailed)
		})
	}
}

// TestClaimUnknownOutcomeKeepsAttempt: a claim write lands but its answer is lost for good. The
// claim must not use up an attempt: with MaxAttempts 1 the item is still handled, not
// dead-lettered unhandled.
func TestClaimUnknownOutcomeKeepsAttempt(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 1)
			var lose onceFlag
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if isTransition(call.In.(*dynamodb.UpdateItemInput), ":until") && lose.first() {
					if _, err := send(ctx, call.In); err != nil {
						return nil, err
					}
					return nil, errTransient // landed, answer lost
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem)
			c := fastTimings(f.config(kind))
			c.Workers = 1
			c.Client, c.Once, c.MaxAttempts, c.ClaimTTL = workerClient(fc), true, 1, time.Second
			w, err := New(c)
			require.NoError(t, err)
			var calls atomic.Int64
			err = runOnceWithin(t, w, func(context.Context, Item) error { calls.Add(1); return nil }, time.Minute)
			require.NoError(t, err)
			require.True(t, lose.used.Load())
			requireStatus(t, f, kind, itemKey(0), StatusDone)
			require.EqualValues(t, 1, calls.Load())
			require.Zero(t, w.Stats().DeadLettered)
		})
	}
}

// TestBatchReadBackFailureKeepsAttempt: a batch of claims lands but reading their attempt
// numbers back fails. The claims must not use up an attempt. (The inline ledger's items are in a
// due retry, so the scan does not see them fresh and their claims are read back; only a
// transaction batch reads back, a statement batch claims such items one UpdateItem each.)
func TestBatchReadBackFailureKeepsAttempt(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 5
			f := newFixture(t, 0)
			f.seed(t, 0, n, func(_ int, item map[string]types.AttributeValue) {
				if kind == LedgerInline {
					item[DefaultAttrPrefix+"status"] = &types.AttributeValueMemberS{Value: string(StatusRetry)}
					item[DefaultAttrPrefix+"retry_at"] = &types.AttributeValueMemberN{Value: "0"}
				}
			})
			var failGet, failed onceFlag
			var armed atomic.Bool
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				out, err := send(ctx, call.In)
				if err == nil && failGet.first() {
					armed.Store(true)
				}
				return out, err
			}, ddbfault.OpTransactWriteItems)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if armed.Load() && aws.ToBool(call.In.(*dynamodb.GetItemInput).ConsistentRead) && failed.first() {
					return nil, errTransient
				}
				return send(ctx, call.In)
			}, ddbfault.OpGetItem)
			c := fastTimings(f.config(kind))
			c.Workers = 1
			c.Client, c.Once, c.MaxAttempts, c.ClaimTTL, c.BatchClaims = workerClient(fc), true, 1, time.Second, true
			c.TransactionBatches = true
			c.Segments = 1 // the items in one page: one batch
			w, err := New(c)
			require.NoError(t, err)
			err = runOnceWithin(t, w, func(context.Context, Item) error { return nil }, time.Minute)
			require.NoError(t, err)
			require.True(t, failed.used.Load(), "the read-back never failed")
			for i := range n {
				requireStatus(t, f, kind, itemKey(i), StatusDone)
			}
			require.Zero(t, w.Stats().DeadLettered)
		})
	}
}

// oversize is just under DynamoDB's 400 KB item limit with the test item's own attributes, so
// the inline ledger's claim attributes push it over.
const oversize = 400*1024 - 13 - 5 - 3 - 40

// TestBatchOversizeItemSkipped: with batched claims, an item too large for the inline ledger's
// attributes is reported by key and skipped; every other item is processed.
func TestBatchOversizeItemSkipped(t *testing.T) {
	const n, big = 30, 7
	f := newFixture(t, 0)
	f.seed(t, 0, n, func(i int, item map[string]types.AttributeValue) {
		if i == big {
			item["big"] = &types.AttributeValueMemberB{Value: make([]byte, oversize)}
		}
	})
	c := fastTimings(f.config(LedgerInline))
	c.Workers = 1
	c.Once, c.BatchClaims = true, true
	var mu sync.Mutex
	var unprocessable []string
	c.Hooks.OnItem = func(e ItemEvent) {
		if e.Outcome == OutcomeUnprocessable {
			mu.Lock()
			unprocessable = append(unprocessable, keyID(e.Key))
			mu.Unlock()
		}
	}
	w, err := New(c)
	require.NoError(t, err)
	err = runOnceWithin(t, w, func(context.Context, Item) error { return nil }, 30*time.Second)
	require.NoError(t, err)
	for i := range n {
		if i != big {
			requireStatus(t, f, LedgerInline, itemKey(i), StatusDone)
		}
	}
	require.Equal(t, []string{itemKey(big)}, unprocessable)
	require.EqualValues(t, 1, w.Stats().Unprocessable)
}

// TestBatchClaimsNotAheadOfHandlers: with batched claims and one slow handler, items must not
// wait in the queue until their claim expires: no item fails, none is dead-lettered.
func TestBatchClaimsNotAheadOfHandlers(t *testing.T) {
	const n = 6
	f := newFixture(t, n)
	clk := newTestClock()
	c := f.config(LedgerTable)
	c.Workers, c.Once, c.Clock, c.Concurrency, c.BatchClaims = 1, true, clk, 1, true
	c.ClaimTTL, c.MaxAttempts = time.Second, 1
	c.LeaseTTL, c.Heartbeat = time.Hour, 10*time.Minute
	w, err := New(c)
	require.NoError(t, err)
	var ran atomic.Int64
	err = runOnceWithin(t, w, func(ctx context.Context, it Item) error {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		ran.Add(1)
		clk.Advance(400 * time.Millisecond) // the work takes 0.4 s by the worker's clock
		return nil
	}, time.Minute)
	require.NoError(t, err)
	for i := range n {
		requireStatus(t, f, LedgerTable, itemKey(i), StatusDone)
	}
	st := w.Stats()
	require.Zero(t, st.DeadLettered)
	require.Zero(t, st.Retried)
	require.Zero(t, st.Released, "no claim was made so far ahead that it had to be given back")
	require.EqualValues(t, n, ran.Load())
}

// TestHandlerIgnoringContextAbandoned: a handler that ignores its context is abandoned after its
// claim time plus the grace; Run returns and the item is handled again on the next pass.
func TestHandlerIgnoringContextAbandoned(t *testing.T) {
	f := newFixture(t, 1)
	c := fastTimings(f.config(LedgerTable))
	c.Workers = 1
	c.Once, c.ClaimTTL, c.HandlerGrace = true, time.Second, 300*time.Millisecond
	w, err := New(c)
	require.NoError(t, err)
	stuck := make(chan struct{})
	defer close(stuck)
	var calls atomic.Int64
	err = runOnceWithin(t, w, func(context.Context, Item) error {
		if calls.Add(1) == 1 {
			<-stuck // ignores its context
		}
		return nil
	}, 30*time.Second)
	require.NoError(t, err)
	requireStatus(t, f, LedgerTable, itemKey(0), StatusDone)
	require.EqualValues(t, 2, calls.Load())
	require.EqualValues(t, 1, w.Stats().Abandoned)
}

// TestCompleteOnlyFailureAccounting: in complete-only mode a permanent error dead-letters the item
// and a transient one counts attempts up to MaxAttempts, as in claim mode.
func TestCompleteOnlyFailureAccounting(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 3)
			c := fastTimings(f.config(kind))
			c.Workers = 1
			c.Once, c.CompleteOnly, c.MaxAttempts = true, true, 2
			w, err := New(c)
			require.NoError(t, err)
			err = runOnceWithin(t, w, func(_ context.Context, it Item) error {
				switch keyID(it.Key) {
				case itemKey(0):
					return Permanent(errors.New("bad item"))
				case itemKey(1):
					return errors.New("always fails")
				}
				return nil
			}, 30*time.Second)
			require.NoError(t, err)
			requireStatus(t, f, kind, itemKey(0), StatusFailed)
			st := requireStatus(t, f, kind, itemKey(1), StatusFailed)
			require.Equal(t, 2, st.Attempts)
			requireStatus(t, f, kind, itemKey(2), StatusDone)
		})
	}
}

// TestIdempotencyKeyNamesTable: two tables with the same key under the default job give
// different idempotency keys.
func TestIdempotencyKeyNamesTable(t *testing.T) {
	var keys []string
	for range 2 {
		f := newFixture(t, 1)
		c := fastTimings(f.config(LedgerTable))
		c.Workers = 1
		c.Once = true
		w, err := New(c)
		require.NoError(t, err)
		var got string
		require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error { got = it.IdempotencyKey; return nil }, 30*time.Second))
		require.NotEmpty(t, got)
		keys = append(keys, got)
	}
	require.NotEqual(t, keys[0], keys[1])
}

// TestLateBatchedClaimGivenBack: a batched claim whose handler could only start with less than
// half its claim time left (here the claim write took 0.95 s of a 1 s claim, past the handler's cut-off) is given back
// without counting an attempt, and handled on the next pass.
func TestLateBatchedClaimGivenBack(t *testing.T) {
	const n = 3
	f := newFixture(t, n)
	clk := newTestClock()
	var slow onceFlag
	fc := ddbfault.New(f.db)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		out, err := send(ctx, call.In) // a batch of one (one free handler) is claimed with one UpdateItem
		if err == nil && isTransition(call.In.(*dynamodb.UpdateItemInput), ":until") && slow.first() {
			clk.Advance(950 * time.Millisecond)
		}
		return out, err
	}, ddbfault.OpUpdateItem)
	c := f.config(LedgerTable)
	c.Client, c.Workers, c.Once, c.Clock, c.Concurrency, c.BatchClaims = workerClient(fc), 1, true, clk, 1, true
	c.ClaimTTL, c.MaxAttempts, c.PollInterval = time.Second, 1, 100*time.Millisecond
	c.LeaseTTL, c.Heartbeat = time.Hour, 10*time.Minute
	w, err := New(c)
	require.NoError(t, err)
	// The pass after the give-back waits on the fake clock: keep it moving, but only once every
	// other item is handled (before that, moving it would age the other claims too, and a loaded
	// machine would see them given back as well).
	var ran atomic.Int64
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if ran.Load() == n-1 {
					clk.Advance(20 * time.Millisecond)
				}
			}
		}
	}()
	defer func() { close(stop); <-ticked }()
	err = runOnceWithin(t, w, func(ctx context.Context, it Item) error {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		ran.Add(1)
		return nil
	}, time.Minute)
	require.NoError(t, err)
	require.True(t, slow.used.Load())
	for i := range n {
		st := requireStatus(t, f, LedgerTable, itemKey(i), StatusDone)
		require.Equal(t, 1, st.Attempts, "item %d: the given-back claim used up no attempt", i)
	}
	s := w.Stats()
	require.EqualValues(t, 1, s.Released)
	require.Zero(t, s.DeadLettered)
	require.EqualValues(t, n, ran.Load())
}
