package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCompleteOnlyWritesStatusAndTime: by default a complete-only completion writes the status and
// done_at only (no owner, slot or token, no attempt counted); with CompleteOnlyAudit it also
// records who completed the item and counts the attempt.
func TestCompleteOnlyWritesStatusAndTime(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		for _, audit := range []bool{false, true} {
			name := string(kind) + "/lean"
			if audit {
				name = string(kind) + "/audit"
			}
			t.Run(name, func(t *testing.T) {
				const n = 3
				f := newFixture(t, n)
				c := fastTimings(f.config(kind))
				c.Workers, c.Once, c.CompleteOnly, c.CompleteOnlyAudit, c.Owner = 1, true, true, audit, "auditor"
				w, err := New(c)
				require.NoError(t, err)
				start := time.Now().Add(-time.Second)
				require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, 30*time.Second))
				for i := range n {
					st := requireStatus(t, f, kind, itemKey(i), StatusDone)
					require.True(t, st.DoneAt.After(start), "item %d: done_at %v", i, st.DoneAt)
					if audit {
						require.Equal(t, "auditor", st.Owner, "item %d", i)
						require.Positive(t, st.Token, "item %d", i)
						require.Equal(t, 1, st.Attempts, "item %d", i)
						continue
					}
					require.Empty(t, st.Owner, "item %d: the lean write records no owner", i)
					require.Zero(t, st.Token, "item %d: the lean write records no token", i)
					require.Zero(t, st.Attempts, "item %d: the lean write counts no attempt", i)
				}
			})
		}
	}
}
