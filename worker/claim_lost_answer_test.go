package worker

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynapart/dynapart/ddbfault"
	"github.com/stretchr/testify/require"
)

// A claim whose answer is lost and whose repeat brings no old item is settled by reading the row
// (the deterministic fault sweep, internal/sweep, found this after the holes of issue 12 were
// closed).

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
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.UpdateItemInput)
				if !isTransition(in, ":until") || !lose.first() {
					return send(ctx, in)
				}
				if _, err := send(ctx, in); err != nil { // lands
					return nil, err
				}
				in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureNone
				return send(ctx, in) // the repeat meets the landed claim and brings no old item
			}, ddbfault.OpUpdateItem)
			c := f.config(kind)
			c.Client, c.Workers, c.Once, c.Concurrency, c.MaxAttempts = workerClient(fc), 1, true, 1, 1
			c.ClaimTTL, c.PollInterval = 2*time.Second, 50*time.Millisecond
			requireEachHandledOnce(t, f, c, n, &lose)
		})
	}
}

// TestBatchClaimRefusedWithoutOldImageSettled: the same for a batched claim whose repeat is refused
// by conditions that carry no old items: a claim transaction cancelled with ConditionalCheckFailed
// reasons (transaction batches, and the table ledger's fresh claims), or a statement batch whose
// statements fail their conditions (the inline ledger's statement batches).
func TestBatchClaimRefusedWithoutOldImageSettled(t *testing.T) {
	variants := []struct {
		kind       LedgerKind
		statements bool
	}{{LedgerInline, false}, {LedgerTable, false}, {LedgerInline, true}}
	for _, v := range variants {
		name := string(v.kind)
		if v.statements {
			name += "-statements"
		}
		t.Run(name, func(t *testing.T) {
			const n = 8
			f := newFixture(t, n)
			var lose onceFlag
			fc := ddbfault.New(f.db)
			if v.statements {
				fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
					in := call.In.(*dynamodb.BatchExecuteStatementInput)
					if !isClaimStatement(in.Statements[0]) || !lose.first() {
						return send(ctx, in)
					}
					if _, err := send(ctx, in); err != nil { // lands
						return nil, err
					}
					for i := range in.Statements {
						in.Statements[i].ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureNone
					}
					return send(ctx, in) // the repeat: every condition fails, no old items
				}, ddbfault.OpBatchExecuteStatement)
			} else {
				fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
					in := call.In.(*dynamodb.TransactWriteItemsInput)
					if in.TransactItems[0].Update == nil || !isTransition(&dynamodb.UpdateItemInput{UpdateExpression: in.TransactItems[0].Update.UpdateExpression}, ":until") || !lose.first() {
						return send(ctx, in)
					}
					if _, err := send(ctx, in); err != nil { // lands
						return nil, err
					}
					for _, it := range in.TransactItems {
						it.Update.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureNone
					}
					in.ClientRequestToken = nil
					return send(ctx, in) // a new transaction: cancelled, no old items
				}, ddbfault.OpTransactWriteItems)
			}
			c := f.config(v.kind)
			c.Client, c.Workers, c.Once, c.Concurrency, c.MaxAttempts, c.BatchClaims = workerClient(fc), 1, true, 4, 1, true
			c.TransactionBatches = !v.statements
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
