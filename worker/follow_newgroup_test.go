package worker

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/follow"
)

// TestFollowNewGroupHandlesChangeNoStreamHolds: a versioned back-fill of a job finishes every item
// (group g1, once, no stream); an item changes while no stream is on; then a follower group g2 of
// the same job starts. Its first pass handles the new version with either ledger: the table
// ledger's plain pass reads no rows, so a claim refused by a row finished at another version than
// the scanned content reopens the item (pass.renewRefused), as the inline ledger's dispatch does
// from the scanned state, and claims it in the same pass (one pass over the share, as the inline
// ledger). Before, the table ledger's row stayed done at the old version for good.
func TestFollowNewGroupHandlesChangeNoStreamHolds(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind LedgerKind
		mod  func(*Config)
	}{
		{"inline", LedgerInline, nil},
		{"table", LedgerTable, nil},
		{"table batched claims", LedgerTable, func(c *Config) { c.BatchClaims = true }},
		{"table complete-only", LedgerTable, func(c *Config) { c.CompleteOnly = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 3)
			runs := newReviewRuns()
			backfillThenChange(t, f, tc.kind, tc.mod, runs, 1, 0)
			requireStatus(t, f, tc.kind, itemKey(0), StatusDone)
			gs := newReviewStreams(t, true, 0)
			a := startReview(t, f, tc.kind, "A", gs, func(c *Config) {
				c.Group = "g2"
				if tc.mod != nil {
					tc.mod(c)
				}
			}, runs.handler("A"))
			gs.following(t)
			reviewWait(t, 30*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, tc.kind, itemKey(0)) })
			rs := runs.of(itemKey(0))
			require.Len(t, rs, 2, "item 0: the back-fill's run and one of its new version: %v", rs)
			require.Equal(t, 1000, rs[1].n, "%v", rs)
			for i := 1; i < 3; i++ {
				require.Len(t, runs.of(itemKey(i)), 1, "item %d did not change: handled once", i)
			}
			// In the pass that met it: one pass over the share, the other two items skipped.
			st := a.Stats()
			require.EqualValues(t, 1, st.Passes, "%+v", st)
			require.EqualValues(t, 3, st.Scanned, "%+v", st)
			require.EqualValues(t, 2, st.Skipped, "%+v", st)
		})
	}
}

// TestFollowBatchReopenDoesNotHoldClaims: with batched claims, the items a chunk's claims met
// finished at another version are reopened by handlers after the chunk's claimed items are handed
// over, not one after another before: with slow reads of the source table (400 ms each, as under
// throttling) the claimed items' clocks ran out while five reopens went in turn, and they were
// given back and claimed again in a second pass after PollInterval.
func TestFollowBatchReopenDoesNotHoldClaims(t *testing.T) {
	f := newFixture(t, 5)
	runs := newReviewRuns()
	backfillThenChange(t, f, LedgerTable, func(c *Config) { c.BatchClaims = true }, runs, 5, 3)

	fc := ddbfault.New(f.db)
	fc.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		if in, ok := c.In.(*dynamodb.GetItemInput); ok && aws.ToString(in.TableName) == f.table {
			time.Sleep(400 * time.Millisecond) // a slow (throttled, retried) read of the source table
		}
		return send(ctx, c.In)
	}, ddbfault.OpGetItem)
	gs := newReviewStreams(t, true, 0)
	a := startReview(t, f, LedgerTable, "A", gs, func(c *Config) {
		c.Group, c.BatchClaims, c.Concurrency, c.Segments, c.SubSegments = "g2", true, 16, 1, 1 // one page, one chunk
		c.Client = workerClient(fc)
		c.WriteTimeout = 10 * time.Second
	}, runs.handler("A"))
	gs.following(t)
	for i := range 8 {
		reviewWait(t, 30*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, LedgerTable, itemKey(i)) })
	}
	st := a.Stats()
	require.EqualValues(t, 0, st.Released, "claimed items waited for the chunk's reopens and were given back: %+v", st)
	require.EqualValues(t, 1, st.Passes, "%+v", st)
	for i := range 8 {
		require.Len(t, runs.of(itemKey(i)), map[bool]int{true: 2, false: 1}[i < 5], "item %d", i)
	}
}

// backfillThenChange runs a versioned back-fill of f's items (group g1, once, mod applied), then,
// while no stream is on, gives items 0..changed-1 new versions (n = 1000+i) and seeds added new
// items after them, and turns the stream on: what a follower group of the same job starts with.
func backfillThenChange(t *testing.T, f *fixture, kind LedgerKind, mod func(*Config), runs *reviewRuns, changed, added int) {
	t.Helper()
	ctx := context.Background()
	cfg := f.config(kind)
	cfg.Group, cfg.Owner, cfg.Workers, cfg.Once, cfg.Versions = "g1", "B", 1, true, true
	if mod != nil {
		mod(&cfg)
	}
	w, err := New(cfg)
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, w.Run(rctx, runs.handler("once")))
	require.Len(t, runs.of(itemKey(0)), 1)
	n := runs.total() // the items seeded: each ran once
	for i := range changed {
		setN(t, f, i, 1000+i) // a new version, in no stream
	}
	f.seed(t, n, added, nil) // new items: no row yet
	_, _, err = follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
}
