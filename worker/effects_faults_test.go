package worker

// Regression tests from an adversarial review of effects and complete-only (each failed before its
// fix).

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/ledger"
)

// a handler whose item effect DynamoDB refuses as invalid (ADD a string set to the number
// attribute "n": a handler bug). With the inline ledger the merged write's
// ValidationException is not an *EffectError: in complete-only mode the item is retried every
// RetryBackoff for ever, no attempt counted, never dead-lettered; the once-job never ends.
func TestInvalidItemEffectsEndTheJob(t *testing.T) {
	for _, mode := range []string{"complete-only", "claim"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, 1) // item "n" is a number; ADD a string set to it is invalid
			c := fastTimings(f.config(LedgerInline))
			c.Workers, c.Once, c.MaxAttempts = 1, true, 3
			c.CompleteOnly = mode == "complete-only"
			c.ClaimTTL = 2 * time.Second
			w, err := New(c)
			require.NoError(t, err)
			var calls atomic.Int64
			h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
				calls.Add(1)
				return (&Effects{}).Item(ledger.Add("n", []string{"x"})), nil // a handler bug: wrong type
			})
			ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
			defer cancel()
			err = w.Run(ctx, h)
			s, serr := f.ledger(t, LedgerInline, "").Summarize(context.Background())
			require.NoError(t, serr)
			t.Logf("%s: Run returned %v after 12s budget; handler calls %d (MaxAttempts 3); summary %+v; stats %+v",
				mode, err, calls.Load(), s, w.Stats())
			require.False(t, errors.Is(err, context.DeadlineExceeded), "the once-job did not end")
			require.LessOrEqual(t, calls.Load(), int64(3), "more handler runs than MaxAttempts")
		})
	}
}

// complete-only, no effects: an item a few bytes under 400 KB, too large to take the
// completion's attributes. Claim mode reports such an item unprocessable and skips it (README);
// complete-only retries it every RetryBackoff for ever and the once-job never ends.
func TestCompleteOnlyTooLargeItemIsUnprocessable(t *testing.T) {
	f := newFixture(t, 0)
	big := strings.Repeat("x", 409600-7-3-30)
	_, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "k0000"}, "big": &types.AttributeValueMemberS{Value: big}}})
	require.NoError(t, err)
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once, c.CompleteOnly, c.MaxAttempts = 1, true, true, 3
	w, err := New(c)
	require.NoError(t, err)
	var calls atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	err = w.Run(ctx, func(context.Context, Item) error { calls.Add(1); return nil })
	t.Logf("Run returned %v; handler calls %d; stats completed=%d unprocessable=%d retried=%d",
		err, calls.Load(), w.Stats().Completed, w.Stats().Unprocessable, w.Stats().Retried)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "the once-job did not end")
}

// hole 6 of issue 31 in claim mode: a completion lands, its answer is lost (no SDK repeat).
// Complete-only settles such a write by a read; a claim's completion does not (settleCut reads
// only when the lease ended): the worker counts the item as an unknown outcome, not completed.
func TestLostCompletionAnswerCountedCompleted(t *testing.T) {
	const n = 10
	f := newFixture(t, n)
	fc := ddbfault.New(f.db)
	fc.Inject(ddbfault.Fault{Kind: ddbfault.LostAnswer, At: 2, Ops: []string{ddbfault.OpUpdateItem}, Table: f.table})
	c := fastTimings(f.config(LedgerInline))
	c.Client, c.Workers, c.Once, c.ClaimTTL, c.Concurrency = fc, 1, true, 2*time.Second, 1
	w, err := New(c)
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, time.Minute))
	hit, _ := fc.Injected()
	s, err := f.ledger(t, LedgerInline, "").Summarize(context.Background())
	require.NoError(t, err)
	st := w.Stats()
	t.Logf("fault hit %s call %d landed=%v err=%v; summary %+v; stats completed=%d skipped=%d",
		hit.Op, hit.Call, hit.Landed, hit.ServerErr, s, st.Completed, st.Skipped)
	require.EqualValues(t, n, st.Completed, "every item was completed by this worker")
}

// README: "A conflict with another transaction ... or throttling is retried with backoff and
// never counted as a failed attempt." On the merged path (inline ledger, an update of the item
// only: the completion's own UpdateItem) a throttled commit (the SDK's retries used up) is an
// unknown outcome: the claim runs out, the item is claimed again (attempt 2), the handler runs
// again; with MaxAttempts 1 the item is dead-lettered by the throttle alone.
func TestThrottledCommitIsRetriedNotCounted(t *testing.T) {
	f := newFixture(t, 1)
	fc := ddbfault.New(f.db)
	fc.Inject(ddbfault.Fault{Kind: ddbfault.Throttle, At: 2, Ops: []string{ddbfault.OpUpdateItem}, Table: f.table})
	c := fastTimings(f.config(LedgerInline))
	c.Client, c.Workers, c.Once, c.ClaimTTL, c.Concurrency, c.MaxAttempts = fc, 1, true, 2*time.Second, 1, 1
	w, err := New(c)
	require.NoError(t, err)
	var calls atomic.Int64
	h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
		calls.Add(1)
		return (&Effects{}).Item(ledger.Set("migrated", true)), nil
	})
	require.NoError(t, runOnceWithin(t, w, h, time.Minute))
	hit, _ := fc.Injected()
	s, err := f.ledger(t, LedgerInline, "").Summarize(context.Background())
	require.NoError(t, err)
	t.Logf("fault %s on %s; handler calls %d; summary %+v", hit.Fault, hit.Op, calls.Load(), s)
	require.EqualValues(t, 1, s.Done, "a throttled commit was counted as an attempt")
}
