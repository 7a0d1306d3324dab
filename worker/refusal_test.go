package worker

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/follow"
)

// deniedErr is DynamoDB's refusal of op for a role without the permission.
func deniedErr(op string) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op,
		Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "refusal test: not authorized"}}
}

// denyOn is a worker client over f.db that refuses op on f.table while deny holds, counting the
// refusals.
func denyOn(f *fixture, op string, deny *atomic.Bool, refused *atomic.Int64) *ddbfault.Client {
	fc := ddbfault.New(f.db)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if !deny.Load() || !slices.Contains(call.Tables, f.table) {
			return send(ctx, call.In)
		}
		refused.Add(1)
		return nil, deniedErr(call.Op)
	}, op)
	return fc
}

// A ledger write that DynamoDB refuses for good and for every item (AccessDeniedException: the
// worker's role lacks a permission) ends the pass as a failed scan does: the slot retries passes
// until OutageTimeout and Run returns the error. Before stopOnRefusal a --once job retried the
// items pass after pass, for ever: each case below hung to its timeout. Refused: the claim, and
// the complete-only completion (without effects: the ledger's own write).
func TestWriteRefusedForGoodEndsTheRun(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("completeOnly=%v", completeOnly), func(t *testing.T) {
			f := newFixture(t, 20)
			var deny atomic.Bool
			deny.Store(true)
			var refused atomic.Int64
			c := fastTimings(f.config(LedgerInline))
			c.Client, c.Workers, c.Once, c.Concurrency, c.CompleteOnly = denyOn(f, ddbfault.OpUpdateItem, &deny, &refused), 1, true, 4, completeOnly
			c.OutageTimeout = 500 * time.Millisecond
			w, err := New(c)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = w.Run(ctx, func(context.Context, Item) error { return nil })
			require.NoError(t, ctx.Err(), "Run returned before the test's timeout")
			require.ErrorContains(t, err, "AccessDeniedException")
			require.ErrorContains(t, err, "OutageTimeout")
			require.Positive(t, refused.Load())
			require.Zero(t, w.Stats().Completed)
		})
	}
}

// An effect commit that DynamoDB denies (the role may not write the table an effect names) is
// the effect's refusal, as a table that does not exist is: nothing of it applied, the item
// dead-lettered at once with the reason, its handler run once. It was an unknown outcome: retried,
// then settled by a read, the item handled again at every claim's expiry until MaxAttempts, whose
// dead letter hid the cause (helper-64).
func TestEffectCommitDeniedIsDeadLettered(t *testing.T) {
	const items = 6
	f := newFixture(t, items)
	var deny atomic.Bool
	deny.Store(true)
	var refused atomic.Int64
	c := fastTimings(f.config(LedgerInline))
	c.Client, c.Workers, c.Once, c.Concurrency = denyOn(f, ddbfault.OpTransactWriteItems, &deny, &refused), 1, true, 2
	w, err := New(c)
	require.NoError(t, err)
	var ran atomic.Int64
	h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
		ran.Add(1)
		return (&Effects{}).Put(f.ledgerTable, map[string]any{"job": "x", "item": keyID(it.Key)}), nil
	})
	require.NoError(t, runOnceWithin(t, w, h, 30*time.Second))
	s := w.Stats()
	require.EqualValues(t, items, s.DeadLettered)
	require.EqualValues(t, items, ran.Load(), "each handler ran once")
	require.EqualValues(t, items, refused.Load(), "each commit sent once")
	st, err := f.ledger(t, LedgerInline, "").State(context.Background(), Key{"id": &types.AttributeValueMemberS{Value: itemKey(0)}})
	require.NoError(t, err)
	require.Equal(t, StatusFailed, st.Status)
	require.Contains(t, st.Error, "AccessDeniedException", "the dead letter names the refusal")
}

// A follower whose claim is refused for good fails its pass the same way and gives up after
// OutageTimeout, also when the refused item is its only one: the pass that resumes the refused
// one, past the item, succeeds, and no longer ends the outage (outage.passSucceeded); before, the
// passes failed and succeeded in turn for ever. (A refusal in its stream reader returns from
// followRecords the same way; it restarted the reader at once, for ever: helper-64, 228 reader
// starts in 6 s.)
func TestFollowerWriteRefusedForGoodEndsTheRun(t *testing.T) {
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(context.Background(), f.db, f.table)
	require.NoError(t, err)
	var deny atomic.Bool
	var refused atomic.Int64
	fc := denyOn(f, ddbfault.OpUpdateItem, &deny, &refused)
	w := startReview(t, f, LedgerInline, "A", streamsClient(t), func(c *Config) {
		c.Client, c.OutageTimeout, c.PollInterval = fc, time.Second, 200*time.Millisecond
	}, func(context.Context, Item) error { return nil })
	reviewWait(t, 30*time.Second, func() (bool, string) { return w.Stats().Follow != nil, "following" })
	deny.Store(true)
	f.seed(t, 0, 1, nil)
	select {
	case err := <-w.done:
		require.ErrorContains(t, err, "AccessDeniedException")
		require.ErrorContains(t, err, "OutageTimeout")
	case <-time.After(60 * time.Second):
		t.Fatalf("the follower did not give up (%d refused writes)", refused.Load())
	}
	require.Less(t, refused.Load(), int64(50), "a failed pass waits before the next")
}
