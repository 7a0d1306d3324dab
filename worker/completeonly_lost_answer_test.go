package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/lock"
)

// Issue 31, hole 6: a complete-only write lands, its answer is lost and the SDK's repeat is
// refused (the item is done now). The item was completed by this worker: the stats, the item
// events and the slot's saved done count must say completed, not skipped.
func TestCompleteOnlyLostAnswerCountedCompleted(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 10
			f := newFixture(t, n)
			stateTable := f.table // where the complete-only writes go
			if kind == LedgerTable {
				stateTable = f.ledgerTable
			}
			fc := ddbfault.New(f.db)
			fc.Inject(ddbfault.Fault{Kind: ddbfault.LostAnswerRetried, At: 4, Ops: []string{ddbfault.OpUpdateItem}, Table: stateTable})
			c := fastTimings(f.config(kind))
			c.Client, c.Workers, c.Once, c.CompleteOnly = fc, 1, true, true
			completed := newCompletions()
			c.Hooks.OnItem = completed.hook("w")
			w, err := New(c)
			require.NoError(t, err)
			require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, time.Minute))

			hit, ok := fc.Injected()
			require.True(t, ok, "the fault was injected")
			require.True(t, hit.Landed, "the lost answer's write landed")
			require.NoError(t, hit.ServerErr, "the lost answer's write was applied")
			s, err := f.ledger(t, kind, "").Summarize(context.Background())
			require.NoError(t, err)
			require.Equal(t, Summary{Total: n, Done: n}, s)

			st := w.Stats()
			require.EqualValues(t, n, st.Completed, "every item was completed by this worker, one of them by the write whose answer was lost")
			require.Zero(t, st.Skipped)
			require.EqualValues(t, n, completed.total.Load(), "OutcomeCompleted events")

			locks, err := lock.New(f.db, f.leaseTable)
			require.NoError(t, err)
			gs, err := locks.GroupStatus(context.Background(), w.Config().Group)
			require.NoError(t, err)
			require.Len(t, gs.Slots, 1)
			p, err := ParseSlotProgress(gs.Slots[0].Checkpoint)
			require.NoError(t, err)
			require.EqualValues(t, n, p.Done, "the slot's saved done count")
		})
	}
}
