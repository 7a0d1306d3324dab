package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// realValidationReasons makes the transaction answer as real DynamoDB answers an invalid update
// inside TransactWriteItems: TransactionCanceledException with reason "ValidationError" on the
// item concerned (DynamoDB Local answers a top-level ValidationException instead). Here the
// item's own (merged) update is item 0.
func realValidationReasons(fc *ddbfault.Client) {
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		out, err := send(ctx, call.In)
		var api smithy.APIError
		if err != nil && errors.As(err, &api) && api.ErrorCode() == "ValidationException" {
			in := call.In.(*dynamodb.TransactWriteItemsInput)
			reasons := make([]types.CancellationReason, len(in.TransactItems))
			for i := range reasons {
				reasons[i] = types.CancellationReason{Code: aws.String("None")}
			}
			reasons[0] = types.CancellationReason{Code: aws.String("ValidationError"), Message: aws.String(api.ErrorMessage())}
			return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [ValidationError, None]"), CancellationReasons: reasons}
		}
		return out, err
	}, ddbfault.OpTransactWriteItems)
}

// TestInvalidItemEffectInTransactionDeadLetters: an item effect DynamoDB refuses (a handler bug:
// ADD a string set to the number n) with a write to another table, inline ledger, answered as
// DynamoDB answers it (the transaction's reason ValidationError on the completion, which carries
// the item's changes): a permanent failure, one handler run, the item dead-lettered, the job ends
// (it was retried as a transient error: 71 runs in 15 s in complete-only mode).
func TestInvalidItemEffectInTransactionDeadLetters(t *testing.T) {
	for _, mode := range []string{"complete-only", "claim"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, 1)
			other := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
			fc := ddbfault.New(f.db)
			realValidationReasons(fc)
			c := fastTimings(f.config(LedgerInline))
			c.Client, c.Workers, c.Once, c.MaxAttempts = fc, 1, true, 3
			c.CompleteOnly = mode == "complete-only"
			c.ClaimTTL = 2 * time.Second
			w, err := New(c)
			require.NoError(t, err)
			var calls atomic.Int64
			h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
				calls.Add(1)
				return (&Effects{}).Item(ledger.Add("n", []string{"x"})).
					Update(other, ledger.Key{"pk": &types.AttributeValueMemberS{Value: "c"}}, ledger.Add("n", 1)), nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = w.Run(ctx, h)
			s, serr := f.ledger(t, LedgerInline, "").Summarize(context.Background())
			require.NoError(t, serr)
			require.NoError(t, err, "the once-job ends")
			require.EqualValues(t, 1, calls.Load(), "a permanent failure runs once")
			require.EqualValues(t, 1, s.Failed, "README: a DynamoDB refusal of the item's own update is a permanent failure (dead-lettered)")
		})
	}
}

// TestMergedCommitConflictsNotCounted: README: "A conflict with another transaction ... is retried
// with backoff and never counted as a failed attempt." The merged commit (inline ledger, an update
// of the item alone) meets TransactionConflictException (the item in another client's
// transaction) 6 times in a row, more than a claim retries: the item is done after one run
// (it was failed with MaxAttempts 1 in claim mode, run twice in complete-only mode).
func TestMergedCommitConflictsNotCounted(t *testing.T) {
	for _, mode := range []string{"claim", "complete-only"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, 1)
			fc := ddbfault.New(f.db)
			var conflicts atomic.Int64
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.UpdateItemInput)
				if _, ok := in.ExpressionAttributeNames["#0"]; ok && conflicts.Add(1) <= 6 {
					return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem)
			c := fastTimings(f.config(LedgerInline))
			c.Client, c.Workers, c.Once, c.ClaimTTL, c.Concurrency, c.MaxAttempts = fc, 1, true, 2*time.Second, 1, 1
			c.CompleteOnly = mode == "complete-only"
			w, err := New(c)
			require.NoError(t, err)
			var calls atomic.Int64
			h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
				calls.Add(1)
				return (&Effects{}).Item(ledger.Add("runs", 1)), nil
			})
			require.NoError(t, runOnceWithin(t, w, h, time.Minute))
			s, err := f.ledger(t, LedgerInline, "").Summarize(context.Background())
			require.NoError(t, err)
			require.EqualValues(t, 1, s.Done, "a conflict was counted as a failed attempt (MaxAttempts 1)")
			require.EqualValues(t, 1, calls.Load())
		})
	}
}
