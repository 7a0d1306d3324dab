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
	"github.com/dynapart/dynapart/internal/ddbtest"
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

// An effect commit that DynamoDB denies (the role may not write the table an effect names) ends
// the pass as a refused write does: every item that writes the table meets the same refusal. The
// claim is given back (no attempt used, nothing dead-lettered), and a run with the permission
// commits the effects. It was an unknown outcome: sent again, settled by a read, and the item
// handled again at every claim's expiry until MaxAttempts, whose dead letter hid the cause
// (helper-64); dead-lettered at once instead, every item of the job would have needed a redrive
// (helper-65).
func TestEffectCommitDeniedEndsTheRun(t *testing.T) {
	const items = 6
	f := newFixture(t, items)
	var deny atomic.Bool
	deny.Store(true)
	var refused atomic.Int64
	c := fastTimings(f.config(LedgerInline))
	c.Client, c.Workers, c.Once, c.Concurrency = denyOn(f, ddbfault.OpTransactWriteItems, &deny, &refused), 1, true, 2
	c.OutageTimeout = 500 * time.Millisecond
	w, err := New(c)
	require.NoError(t, err)
	rows := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "id", Type: "S"}) // the table an effect writes
	h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
		return (&Effects{}).Put(rows, map[string]any{"id": keyID(it.Key)}), nil
	})
	requireRefusedRun(t, f, w, h, "AccessDeniedException")

	deny.Store(false) // the operator grants the write
	w, err = New(c)
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, w, h, 30*time.Second))
	require.EqualValues(t, items, w.Stats().Completed)
}

// An effect commit that names a table that does not exist (a typo in the handler's table name, a
// table not yet deployed) ends the pass as a denied one does, in claim and complete-only mode: the
// error names the table, nothing is dead-lettered and no attempt used, and a run whose handler
// writes a table that exists commits the effects. Before, every item was dead-lettered with the
// reason, its handler run once each, and a --once job exited 0: the whole job needed a redrive.
func TestEffectTableMissingEndsTheRun(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("completeOnly=%v", completeOnly), func(t *testing.T) {
			const items = 6
			f := newFixture(t, items)
			c := fastTimings(f.config(LedgerInline))
			c.Workers, c.Once, c.Concurrency, c.CompleteOnly, c.OutageTimeout = 1, true, 2, completeOnly, 500*time.Millisecond
			var table atomic.Value
			missing := ddbtest.TableName(t, "missing")
			table.Store(missing)
			h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
				return (&Effects{}).Put(table.Load().(string), map[string]any{"id": keyID(it.Key)}), nil
			})
			w, err := New(c)
			require.NoError(t, err)
			requireRefusedRun(t, f, w, h, fmt.Sprintf("a table it writes does not exist (its writes name [%q])", missing))

			table.Store(ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "id", Type: "S"})) // the handler fixed
			w, err = New(c)
			require.NoError(t, err)
			require.NoError(t, runOnceWithin(t, w, h, 30*time.Second))
			require.EqualValues(t, items, w.Stats().Completed)
		})
	}
}

// requireRefusedRun runs w once with h and requires the run to end with a refusal for good
// (its error naming want, after OutageTimeout) that dead-lettered and completed nothing, and left
// item 0 unfailed with no attempt used: its claim given back.
func requireRefusedRun(t *testing.T, f *fixture, w *Worker, h Handler, want string) {
	t.Helper()
	err := runOnceWithin(t, w, h, 30*time.Second)
	require.ErrorContains(t, err, want)
	require.ErrorContains(t, err, "OutageTimeout")
	require.Zero(t, w.Stats().DeadLettered)
	require.Zero(t, w.Stats().Completed)
	st, err := f.ledger(t, LedgerInline, "").State(context.Background(), Key{"id": &types.AttributeValueMemberS{Value: itemKey(0)}})
	require.NoError(t, err)
	require.NotEqual(t, StatusFailed, st.Status)
	require.Zero(t, st.Attempts, "the claim given back, no attempt used")
}

// A follower whose claim is refused for good fails its pass the same way and gives up after
// OutageTimeout, also when the refused item is its only one, met in its first pass: the pass that
// resumes the refused one, past the item, succeeds, and no longer ends the outage
// (outage.passSucceeded); before, the passes failed and succeeded in turn for ever. A refusal in
// its stream reader ends the follow the same way (followRecords returns it; the reader restarted
// at once, for ever: helper-64, 228 reader starts in 6 s).
//
// The table ledger's follower reads each candidate (a consistent GetItem) before it claims it; a
// read refused for good ends the follow the same way (helper-65: it retried for ever).
func TestFollowerWriteRefusedForGoodEndsTheRun(t *testing.T) {
	for _, tc := range []struct {
		kind LedgerKind
		op   string
	}{{LedgerInline, ddbfault.OpUpdateItem}, {LedgerTable, ddbfault.OpGetItem}} {
		t.Run(fmt.Sprintf("%s/%s", tc.kind, tc.op), func(t *testing.T) {
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(context.Background(), f.db, f.table)
			require.NoError(t, err)
			var deny atomic.Bool
			var refused atomic.Int64
			fc := denyOn(f, tc.op, &deny, &refused)
			w := startReview(t, f, tc.kind, "A", streamsClient(t), func(c *Config) {
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
				t.Fatalf("the follower did not give up (%d refused calls)", refused.Load())
			}
			require.Less(t, refused.Load(), int64(50), "a failed pass waits before the next")
		})
	}
}
