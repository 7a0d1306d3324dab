package worker

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// JobFinished looks at slots 0..N-1 only: a stray slot item beyond N (left by an earlier group
// size, or written by hand) neither blocks nor fakes the answer.
func TestJobFinishedCountsOnlySlotsBelowN(t *testing.T) {
	f := newFixture(t, 6)
	ctx := context.Background()
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once = 2, true
	w, err := New(c)
	require.NoError(t, err)
	for range 2 { // one slot per once-run
		require.NoError(t, w.Run(ctx, func(context.Context, Item) error { return nil }))
	}
	fin, err := w.JobFinished(ctx)
	require.NoError(t, err)
	require.True(t, fin)

	_, err = f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.leaseTable), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "group#" + w.Config().Group}, "sk": &types.AttributeValueMemberN{Value: "2"},
		"owner": &types.AttributeValueMemberS{Value: "stray"}, "token": &types.AttributeValueMemberN{Value: "1"},
		"version": &types.AttributeValueMemberN{Value: "1"}, "expires_at": &types.AttributeValueMemberN{Value: "0"},
	}})
	require.NoError(t, err)
	fin, err = w.JobFinished(ctx)
	require.NoError(t, err)
	require.True(t, fin, "slots 0 and 1 are finished; slot 2 is not part of a 2-slot group")
}

// verify with the table ledger counts only items that exist in the source table; rows of items
// deleted since are reported as orphaned, not as done.
func TestTableLedgerSummaryIgnoresRowsOfDeletedItems(t *testing.T) {
	f := newFixture(t, 5)
	ctx := context.Background()
	c := fastTimings(f.config(LedgerTable))
	c.Workers, c.Once = 1, true
	w, err := New(c)
	require.NoError(t, err)
	require.NoError(t, w.Run(ctx, func(context.Context, Item) error { return nil }))

	for _, i := range []int{1, 3} {
		_, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: skey(itemKey(i))})
		require.NoError(t, err)
	}
	f.seed(t, 5, 2, nil) // two new items, never processed

	s, err := f.ledger(t, LedgerTable, "").Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, Summary{Total: 5, Done: 3, Pending: 2, Orphaned: 2}, s)
}

// Stats.WCU and Stats.RCU count every Run of a Worker: a Run's ledger replaces the last one's,
// and what the last one wrote and read stays counted (the budget reports differences of Stats,
// so a drop would leave the next Run's first units unreported).
func TestStatsKeepEarlierRunsLedgerUnits(t *testing.T) {
	f := newFixture(t, 8)
	c := fastTimings(f.config(LedgerTable))
	c.Workers, c.Once, c.CompleteOnly = 1, true, true
	w, err := New(c)
	require.NoError(t, err)
	var ledgerRCU float64 // the ledger's row reads: what Stats.RCU holds beyond the scans'
	for run := range 2 {  // the first Run is stopped after 3 items, the second finishes the job
		ctx, cancel := context.WithCancel(context.Background())
		var handled atomic.Int32 // handlers run concurrently (Concurrency 16)
		before := w.Stats()
		err := w.Run(ctx, func(context.Context, Item) error {
			if n := handled.Add(1); run == 0 && n == 3 {
				cancel()
			}
			return nil
		})
		cancel()
		if run == 1 {
			require.NoError(t, err)
		}
		st := w.Stats()
		done := st.Completed - before.Completed
		require.Positive(t, done, "run %d completed items", run)
		require.GreaterOrEqual(t, st.WCU-before.WCU, float64(done), "run %d: a completion is at least 1 WCU (stats %+v, before %+v)", run, st, before)
		require.Positive(t, w.ledger.ConsumedRCU(), "run %d read state rows before its handlers", run)
		ledgerRCU += w.ledger.ConsumedRCU()
		w.mu.Lock()
		others := w.rcuDone + w.itemRCU // the scans' and item reads' RCU, kept across Runs already
		w.mu.Unlock()
		require.InDelta(t, others+ledgerRCU, st.RCU, 1e-9, "run %d: Stats.RCU holds every run's row reads", run)
	}
	require.Equal(t, int64(8), w.Stats().Completed)
}
