package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ledger"
)

// TestEffectsMayNotWriteTheLeaseTable: an effect that writes the worker's lease table (found by an
// adversarial review: an update of the group's meta item broke the group for every later run) is
// refused before anything is written: the attempt fails permanently, the item is dead-lettered
// with an error naming the table, and the group's next run starts.
func TestEffectsMayNotWriteTheLeaseTable(t *testing.T) {
	f := newFixture(t, 1)
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once = 1, true
	run := func(h Handler) *Worker {
		w, err := New(c)
		require.NoError(t, err)
		require.NoError(t, w.Run(context.Background(), h))
		return w
	}
	w := run(WithEffects(func(_ context.Context, it Item) (*Effects, error) {
		return (&Effects{}).Update(c.LeaseTable, ledger.Key{"pk": &types.AttributeValueMemberS{Value: "group#" + f.table + "/default"},
			"sk": &types.AttributeValueMemberN{Value: "-1"}}, ledger.Set("n", 0)), nil
	}))
	require.Equal(t, int64(1), w.Stats().DeadLettered)
	st, err := f.ledger(t, LedgerInline, "").State(context.Background(), skey(itemKey(0)))
	require.NoError(t, err)
	require.Equal(t, StatusFailed, st.Status)
	require.Contains(t, st.Error, c.LeaseTable)
	c.Group = "again"
	run(func(context.Context, Item) error { return nil }) // the lease table still serves groups
}

// TestEffectRefusedStoredAlikeInEveryMode: effects the ledger refuses (here: a change of the key
// attribute) dead-letter the item with the same stored error in claim and complete-only mode, on
// both ledgers: the ledger's own text (complete-only stored it as "permanent: ..." before).
func TestEffectRefusedStoredAlikeInEveryMode(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		for _, completeOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/complete-only=%v", kind, completeOnly), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, 1)
				c := fastTimings(f.config(kind))
				c.Workers, c.Once, c.CompleteOnly = 1, true, completeOnly
				w, err := New(c)
				require.NoError(t, err)
				require.NoError(t, w.Run(context.Background(), WithEffects(func(context.Context, Item) (*Effects, error) {
					return (&Effects{}).Item(ledger.Set("id", "other")), nil
				})))
				require.Equal(t, int64(1), w.Stats().DeadLettered)
				st, err := f.ledger(t, kind, "").State(context.Background(), skey(itemKey(0)))
				require.NoError(t, err)
				require.Equal(t, StatusFailed, st.Status)
				require.True(t, strings.HasPrefix(st.Error, "dynapart: effect refused: "), st.Error)
				require.Contains(t, st.Error, `"id"`)
			})
		}
	}
}
