package worker

// A review of e9b5581 (a versioned worker's handler gets a claimed item's content as of the claim,
// following or not): the edges of contentAsClaimed for a versioned group that does not follow
// the stream (a --once back-fill with --versions).

import (
	"context"
	"fmt"
	"log/slog"
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
)

// isClaimWrite reports a claim write of the back-fill: an UpdateItem with a claim expiry (not of
// the lease table), or a statement batch of fresh claims.
func (f *fixture) isClaimWrite(call ddbfault.Call) bool {
	in, ok := call.In.(*dynamodb.UpdateItemInput)
	return !ok || in.ExpressionAttributeValues[":until"] != nil && aws.ToString(in.TableName) != f.leaseTable
}

// isSourceGet reports a GetItem of the source table (contentAsClaimed's read).
func (f *fixture) isSourceGet(call ddbfault.Call) bool {
	in, ok := call.In.(*dynamodb.GetItemInput)
	return ok && aws.ToString(in.TableName) == f.table
}

// TestReviewVersionedReadFailsAfterClaim (question 3): the read after the claim fails once (a 500)
// for a versioned non-follower (the table ledger; the inline ledger with batched claims). The
// claim is given back, the attempt not counted, and the item is handled once, in a later pass of
// the --once job, on its current content, done at that version.
func TestReviewVersionedReadFailsAfterClaim(t *testing.T) {
	for _, v := range []struct {
		kind  LedgerKind
		batch bool
	}{{LedgerTable, false}, {LedgerTable, true}, {LedgerInline, true}} {
		t.Run(fmt.Sprintf("%s/batch=%t", v.kind, v.batch), func(t *testing.T) {
			f := newFixture(t, 1)
			fc := ddbfault.New(f.db)
			var failed atomic.Bool
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if f.isSourceGet(call) && failed.CompareAndSwap(false, true) {
					return nil, &smithy.GenericAPIError{Code: "InternalServerError", Message: "review: one failed read"}
				}
				return send(ctx, call.In)
			}, ddbfault.OpGetItem)
			c := fastTimings(f.config(v.kind))
			c.Client, c.Workers, c.Once, c.Concurrency, c.Versions, c.BatchClaims = fc, 1, true, 1, true, v.batch
			w, err := New(c)
			require.NoError(t, err)
			var mu sync.Mutex
			var attempts []int
			require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error {
				mu.Lock()
				attempts = append(attempts, it.Attempt)
				mu.Unlock()
				return nil
			}, time.Minute))
			require.True(t, failed.Load(), "the read after the claim was made (and failed)")
			require.Equal(t, []int{1}, attempts, "handled once, its attempt given back by the release")
			st := requireStatus(t, f, v.kind, itemKey(0), StatusDone)
			require.NotEmpty(t, st.Version)
			s := w.Stats()
			require.EqualValues(t, 1, s.Released)
			require.EqualValues(t, 1, s.Completed)
		})
	}
}

// TestReviewVersionedDeletedBeforeClaim (question 2): the item is deleted between the scan and the
// claim. Inline ledger: the claim is refused (the item is gone), skipped. Table ledger: the claim
// creates the row, the read finds no item, the claim is given back. Either way the --once job
// ends, the handler never runs. This documents what the table ledger leaves: a row in retry
// (attempts 0) for an item that no longer exists, counted in Stats.Released (documented as
// "claims given back at shutdown") and by an OutcomeReleased event. Before e9b5581 the handler
// ran on the scanned content and the row ended done.
func TestReviewVersionedDeletedBeforeClaim(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%t", kind, batch), func(t *testing.T) {
				ctx := context.Background()
				f := newFixture(t, 1)
				fc := ddbfault.New(f.db)
				var once sync.Once
				var delErr error
				fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
					if f.isClaimWrite(call) {
						once.Do(func() {
							_, delErr = f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: skey(itemKey(0))})
						})
					}
					return send(ctx, call.In)
				}, ddbfault.OpUpdateItem, ddbfault.OpBatchExecuteStatement)
				var events sync.Map
				c := fastTimings(f.config(kind))
				c.Client, c.Workers, c.Once, c.Concurrency, c.Versions, c.BatchClaims = fc, 1, true, 1, true, batch
				c.Hooks.OnItem = func(e ItemEvent) { events.Store(e.Outcome, true) }
				w, err := New(c)
				require.NoError(t, err)
				var ran atomic.Int64
				require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { ran.Add(1); return nil }, time.Minute))
				require.NoError(t, delErr)
				require.Zero(t, ran.Load(), "a deleted item is not handled")
				s := w.Stats()
				t.Logf("stats: claimed %d released %d skipped %d completed %d", s.Claimed, s.Released, s.Skipped, s.Completed)
				if kind == LedgerTable {
					st, err := f.ledger(t, kind, "").State(ctx, skey(itemKey(0)))
					require.NoError(t, err)
					t.Logf("row left: %+v", st)
					require.Equal(t, StatusRetry, st.Status)
					require.EqualValues(t, 1, s.Released)
					_, released := events.Load(OutcomeReleased)
					require.True(t, released)
				}
			})
		}
	}
}

// TestReviewVersionedReadDeniedIsLogged: a versioned non-follower with the table ledger whose
// source-table GetItem is refused for good (AccessDeniedException: examples/iam/README.md lists
// GetItem on the source only for the inline ledger, index mode and table-ledger followers, so a
// table-ledger back-fill with --versions following it drops it). The refusal ends the pass, as a
// refused write does (stopOnReadRefusal): Run returns it after OutageTimeout, the claim given back
// without using an attempt, and a run with the permission handles the item. Before, the --once job
// claimed and gave back the item (complete-only: read it) pass after pass, for ever; counted
// unprocessable instead, it ended "finished" and a rerun did nothing (helper-64).
func TestReviewVersionedReadDeniedIsLogged(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("completeOnly=%v", completeOnly), func(t *testing.T) {
			f := newFixture(t, 1)
			fc := ddbfault.New(f.db)
			var deny atomic.Bool
			deny.Store(true)
			var denied atomic.Int64
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if deny.Load() && f.isSourceGet(call) {
					denied.Add(1)
					return nil, deniedErr("GetItem")
				}
				return send(ctx, call.In)
			}, ddbfault.OpGetItem)
			var buf syncBuffer
			c := fastTimings(f.config(LedgerTable))
			c.Client, c.Workers, c.Once, c.Concurrency, c.Versions, c.CompleteOnly = fc, 1, true, 1, true, completeOnly
			c.OutageTimeout = 500 * time.Millisecond
			c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
			w, err := New(c)
			require.NoError(t, err)
			var ran atomic.Int64
			h := func(context.Context, Item) error { ran.Add(1); return nil }
			err = runOnceWithin(t, w, h, 30*time.Second)
			require.ErrorContains(t, err, "AccessDeniedException", "Run gives up with the refusal")
			require.ErrorContains(t, err, "OutageTimeout")
			require.Zero(t, ran.Load())
			require.Positive(t, denied.Load())
			require.Contains(t, buf.String(), "refuses a request for good", "the refusal is logged")
			st, err := f.ledger(t, LedgerTable, w.Config().Job).State(context.Background(), Key{"id": &types.AttributeValueMemberS{Value: itemKey(0)}})
			require.NoError(t, err)
			require.NotEqual(t, StatusDone, st.Status, "left for a later run")
			require.Zero(t, st.Attempts, "no attempt used")

			deny.Store(false) // the operator grants GetItem
			w, err = New(c)
			require.NoError(t, err)
			require.NoError(t, runOnceWithin(t, w, h, 30*time.Second))
			require.EqualValues(t, 1, ran.Load(), "the rerun handles the item")
			require.EqualValues(t, 1, w.Stats().Completed)
		})
	}
}

// TestReviewVersionedReadsCountInRCU (question 5, cost): a versioned non-follower with the table
// ledger reads each claimed item again (a consistent GetItem, 1 RCU per 4 KB, against a scan's
// 0.5 RCU per 4 KB of items). Those reads count nowhere: Stats.RCU (what a --max-rcu budget adds
// up) counts the scans only, ReadRate does not pace them, FollowStats (where a follower's count
// them) is nil without Follow, and `work --dry-run` leaves them out of its estimate. Fails: the
// reads' RCU is missing from Stats.RCU.
func TestReviewVersionedReadsCountInRCU(t *testing.T) {
	const items = 40
	f := newFixture(t, items)
	fc := ddbfault.New(f.db)
	var mu sync.Mutex
	var getRCU, scanRCU float64
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		out, err := send(ctx, call.In)
		mu.Lock()
		defer mu.Unlock()
		switch o := out.(type) {
		case *dynamodb.GetItemOutput:
			if f.isSourceGet(call) && o.ConsumedCapacity != nil {
				getRCU += aws.ToFloat64(o.ConsumedCapacity.CapacityUnits)
			}
		case *dynamodb.ScanOutput:
			if in := call.In.(*dynamodb.ScanInput); aws.ToString(in.TableName) == f.table && o.ConsumedCapacity != nil {
				scanRCU += aws.ToFloat64(o.ConsumedCapacity.CapacityUnits)
			}
		}
		return out, err
	}, ddbfault.OpGetItem, ddbfault.OpScan)
	c := fastTimings(f.config(LedgerTable))
	c.Client, c.Workers, c.Once, c.Concurrency, c.Versions = fc, 1, true, 4, true
	w, err := New(c)
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, time.Minute))
	s := w.Stats()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("Stats.RCU %.2f; the source scans' RCU %.2f; the reads after the claims' RCU %.2f", s.RCU, scanRCU, getRCU)
	require.EqualValues(t, items, s.Completed)
	require.GreaterOrEqual(t, getRCU, float64(items), "a consistent read per claimed item")
	require.GreaterOrEqual(t, s.RCU, scanRCU+getRCU, "Stats.RCU counts the reads after the claims")
}
