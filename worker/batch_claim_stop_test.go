package worker

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// TestGracefulStopDuringClaimBatch: a graceful stop (Run's context cancelled, as SIGINT does)
// while a batch of claims is in flight must leave no item claimed and count no attempt. The batch
// was sent under the context the stop cancels: the client gave up on it while DynamoDB applied it,
// and the claims its undo could not yet see stayed until they expired, each an attempt used up
// without a handler run (helper-68 found up to 25 left claimed after a Ctrl-C with
// --batch-claims). A claim batch is now sent under the write context, as a single claim is, and
// the claims the stop keeps from their handlers are released.
func TestGracefulStopDuringClaimBatch(t *testing.T) {
	variants := []struct {
		name       string
		kind       LedgerKind
		statements bool
	}{{"inline-statements", LedgerInline, true}, {"inline-transactions", LedgerInline, false}, {"table", LedgerTable, false}}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			const n = 8
			f := newFixture(t, n)
			inBatch, stopped := make(chan struct{}), make(chan struct{})
			var held onceFlag
			var late func() // the batch a caller gave up on, which DynamoDB applies after all
			// The first claim batch waits for the stop. A caller that still listens then gets
			// its answer; one whose context the stop cancelled gives up at once, and DynamoDB
			// applies the batch late (once Run has returned: after any undo the caller tries).
			hold := func(ctx context.Context, in any, send ddbfault.Send) (any, error) {
				close(inBatch)
				<-stopped
				if err := ctx.Err(); err != nil {
					late = func() { _, _ = send(context.WithoutCancel(ctx), in) }
					return nil, err
				}
				return send(ctx, in)
			}
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.BatchExecuteStatementInput)
				if !isClaimStatement(in.Statements[0]) || !held.first() {
					return send(ctx, in)
				}
				return hold(ctx, in, send)
			}, ddbfault.OpBatchExecuteStatement)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.TransactWriteItemsInput)
				u := in.TransactItems[0].Update
				if u == nil || !isTransition(&dynamodb.UpdateItemInput{UpdateExpression: u.UpdateExpression}, ":until") || !held.first() {
					return send(ctx, in)
				}
				return hold(ctx, in, send)
			}, ddbfault.OpTransactWriteItems)
			c := f.config(v.kind)
			c.Client, c.Workers, c.Once, c.Concurrency, c.BatchClaims = workerClient(fc), 1, true, 4, true
			c.TransactionBatches = !v.statements
			c.ClaimTTL, c.PollInterval = time.Minute, 50*time.Millisecond
			c.Segments = 1 // the items in one page: one batch
			w, err := New(c)
			require.NoError(t, err)
			hc := newHandlerCalls()
			handler := func(_ context.Context, it Item) error { hc.record(it); return nil }

			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx, handler) }()
			select {
			case <-inBatch:
			case <-time.After(time.Minute):
				t.Fatal("no claim batch was sent")
			}
			stop() // the graceful stop, while the batch is in flight
			close(stopped)
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("Run did not return after the stop")
			}
			if late != nil {
				late()
			}
			for i := range n {
				st, err := f.ledger(t, v.kind, "").State(context.Background(), skey(itemKey(i)))
				require.NoError(t, err)
				require.NotEqual(t, StatusClaimed, st.Status, "item %d left claimed by the stop: %+v", i, st)
			}

			// A rerun handles every item once, on its first counted attempt.
			c.Client = f.db
			w, err = New(c)
			require.NoError(t, err)
			require.NoError(t, runOnceWithin(t, w, handler, time.Minute))
			for i := range n {
				st := requireStatus(t, f, v.kind, itemKey(i), StatusDone)
				require.Equal(t, 1, st.Attempts, "item %d: the stop used up an attempt", i)
				require.Equal(t, 1, hc.calls[itemKey(i)], "item %d", i)
			}
		})
	}
}

// TestStopMakesNoNewClaims: after a graceful stop, items still queued for a handler are neither
// claimed nor handled (README: "no new claims"); the handler in flight finishes its item. They
// were claimed and handled during the drain, and with --exec a command could start as a second
// signal came (helper-69).
func TestStopMakesNoNewClaims(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "claim", true: "complete-only"}[completeOnly], func(t *testing.T) {
			const n = 10
			f := newFixture(t, n)
			c := f.config(LedgerInline)
			c.Workers, c.Once, c.Concurrency, c.Segments, c.CompleteOnly = 1, true, 1, 1, completeOnly
			w, err := New(c)
			require.NoError(t, err)
			started, release := make(chan struct{}), make(chan struct{})
			hc := newHandlerCalls()
			var first onceFlag
			handler := func(_ context.Context, it Item) error {
				hc.record(it)
				if first.first() {
					close(started)
					<-release
				}
				return nil
			}
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx, handler) }()
			select {
			case <-started:
			case <-time.After(time.Minute):
				t.Fatal("no handler started")
			}
			stop() // the stop, while one handler runs and the next items wait in the queue
			close(release)
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("Run did not return after the stop")
			}
			require.Len(t, hc.calls, 1, "handlers after the stop: %v", hc.calls)
			done1 := 0
			for i := range n {
				st, err := f.ledger(t, LedgerInline, "").State(context.Background(), skey(itemKey(i)))
				require.NoError(t, err)
				require.Contains(t, []Status{StatusPending, StatusDone}, st.Status, "item %d", i)
				if st.Status == StatusDone {
					done1++
				}
			}
			require.Equal(t, 1, done1, "the handler in flight completes its item, and no other")
		})
	}
}

// Under a write rate a claim batch is no larger than the rate lets through in half a
// WriteTimeout: at 1 WCU/s a batch of 25 (50 WCU as a transaction) waited past WriteTimeout and
// failed every pass (helper-69).
func TestClaimBatchFitsTheWriteRate(t *testing.T) {
	for _, tc := range []struct {
		rate         float64
		transactions bool
		want         int
	}{{0, false, 25}, {1, false, 15}, {1, true, 7}, {0.01, true, 1}, {100, true, 25}} {
		c := Config{WriteRate: tc.rate, TransactionBatches: tc.transactions, WriteTimeout: 30 * time.Second}
		require.Equal(t, tc.want, claimBatchMost(c), "%+v", tc)
	}
}
