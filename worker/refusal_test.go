package worker

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// A ledger write that DynamoDB refuses for good and for every item (AccessDeniedException: the
// worker's role lacks a permission) ends the pass as a failed scan does: the slot retries passes
// until OutageTimeout and Run returns the error. Before stopOnRefusal a --once job retried the
// items pass after pass, for ever: each case below hung to its timeout. Refused: the claim, the
// claim mode's commit of an effect on another table, the complete-only completion.
func TestWriteRefusedForGoodEndsTheRun(t *testing.T) {
	const items = 20
	for _, tc := range []struct {
		name         string
		op           string // the operation refused, on the table named by table
		completeOnly bool
		effect       bool
	}{
		{name: "claim", op: ddbfault.OpUpdateItem},
		{name: "effect commit", op: ddbfault.OpTransactWriteItems, effect: true},
		{name: "complete-only completion", op: ddbfault.OpUpdateItem, completeOnly: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, items)
			fc := ddbfault.New(f.db)
			var refused atomic.Int64
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if !slices.Contains(call.Tables, f.table) {
					return send(ctx, call.In)
				}
				refused.Add(1)
				return nil, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: tc.op,
					Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "refusal test: not authorized"}}
			}, tc.op)
			c := fastTimings(f.config(LedgerInline))
			c.Client, c.Workers, c.Once, c.Concurrency, c.CompleteOnly = fc, 1, true, 4, tc.completeOnly
			c.OutageTimeout = 500 * time.Millisecond
			w, err := New(c)
			require.NoError(t, err)
			var ran atomic.Int64
			h := func(context.Context, Item) error { ran.Add(1); return nil }
			if tc.effect {
				h = WithEffects(func(_ context.Context, it Item) (*Effects, error) {
					ran.Add(1)
					return (&Effects{}).Put(f.ledgerTable, map[string]any{"job": "x", "item": fmt.Sprint(it.Key)}), nil
				})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = w.Run(ctx, h)
			require.Error(t, err, "Run gives up")
			require.NoError(t, ctx.Err(), "before the test's timeout")
			require.ErrorContains(t, err, "AccessDeniedException")
			require.Positive(t, refused.Load())
			require.Zero(t, w.Stats().Completed)
			t.Logf("%s: %v (handler ran %d times, %d refused calls)", tc.name, err, ran.Load(), refused.Load())
		})
	}
}
