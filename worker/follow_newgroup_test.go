package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
			ctx := context.Background()
			f := newFixture(t, 3)
			runs := newReviewRuns()
			cfg := f.config(tc.kind)
			cfg.Group, cfg.Owner, cfg.Workers, cfg.Once, cfg.Versions = "g1", "B", 1, true, true
			if tc.mod != nil {
				tc.mod(&cfg)
			}
			w, err := New(cfg)
			require.NoError(t, err)
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			require.NoError(t, w.Run(rctx, runs.handler("once")))
			cancel()
			requireStatus(t, f, tc.kind, itemKey(0), StatusDone)
			require.Len(t, runs.of(itemKey(0)), 1)

			setN(t, f, 0, 1000) // a new version of item 0, in no stream
			_, _, err = follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
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
