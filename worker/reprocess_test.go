package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
)

// Issue 31, hole 1: a first job finishes the table with batched claims; an operator resets some
// items for reprocessing as the README's reset does (REMOVE dp_status, dp_done_at: dp_attempts
// stays); a second group's once-job with batched claims over two slots must not return before
// every item is done. The scan sees a reset item without state (fresh), and the batched fresh
// claim must not take the attempt for 1 when the write made it the old count + 1: a completion
// fenced on the wrong attempt is refused, and a once-job that then acknowledges the item exits
// with it claimed.
func TestReprocessResetItemsOnceWithBatchedClaims(t *testing.T) {
	const n = 200
	f := newFixture(t, n)
	first := fastTimings(f.config(LedgerInline))
	first.Workers, first.Once, first.BatchClaims, first.Owner = 1, true, true, "first-job"
	w, err := New(first)
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, time.Minute))

	ctx := context.Background()
	reset := map[string]bool{}
	for i := 0; i < n; i += 3 {
		_, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(f.table), Key: skey(itemKey(i)),
			UpdateExpression: aws.String("REMOVE dp_status, dp_done_at"),
		})
		require.NoError(t, err)
		reset[itemKey(i)] = true
	}

	var mu sync.Mutex
	handled := map[string]int{}
	h := func(_ context.Context, it Item) error {
		mu.Lock()
		handled[keyID(it.Key)]++
		mu.Unlock()
		return nil
	}
	second := fastTimings(f.config(LedgerInline))
	second.Group, second.Workers, second.Once, second.BatchClaims = f.table+"/reprocess", 2, true, true
	var cfgs []Config
	for i := range 2 {
		c := second
		c.Owner = fmt.Sprintf("reprocess-%d", i)
		cfgs = append(cfgs, c)
	}
	for i, err := range runAllWithin(t, time.Minute, h, cfgs...) {
		require.NoError(t, err, "worker %d", i)
	}

	s, err := f.ledger(t, LedgerInline, "").Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, Summary{Total: n, Done: n}, s, "the once-job returned nil: every item must be done")
	mu.Lock()
	defer mu.Unlock()
	for id := range reset {
		require.Positive(t, handled[id], "reset item %s was not handled again", id)
	}
	for id := range handled {
		require.True(t, reset[id], "item %s was not reset but was handled again", id)
	}
}

// runAllWithin runs one worker per config side by side, each to the end of its Run, and returns
// their errors in the order of cfgs. It fails the test when they have not all returned within d.
func runAllWithin(t *testing.T, d time.Duration, h Handler, cfgs ...Config) []error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, c := range cfgs {
		w, err := New(c)
		require.NoError(t, err)
		wg.Go(func() { errs[i] = w.Run(ctx, h) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return errs
	case <-time.After(d):
		cancel()
		<-done
		t.Fatalf("the workers did not all return within %s", d)
		return nil
	}
}

// An item whose state another client removes while its handler runs (an operator's reset, or a
// rewrite): the worker's completion finds its claim lost, and the once-job looks at the item again
// instead of acknowledging it, so it returns with the item done (handled twice: the reset asked for
// that), in both claim modes.
func TestResetWhileClaimedIsHandledAgain(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			f := newFixture(t, 5)
			c := fastTimings(f.config(LedgerInline))
			c.Workers, c.Once, c.BatchClaims, c.Concurrency = 1, true, batch, 1
			w, err := New(c)
			require.NoError(t, err)
			var mu sync.Mutex
			handled := map[string]int{}
			h := func(ctx context.Context, it Item) error {
				mu.Lock()
				handled[keyID(it.Key)]++
				first := keyID(it.Key) == itemKey(2) && handled[itemKey(2)] == 1
				mu.Unlock()
				if first { // another client removes the item's state while its handler runs
					_, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.table), Key: skey(itemKey(2)),
						UpdateExpression: aws.String("REMOVE dp_status, dp_claim, dp_claim_until")})
					require.NoError(t, err)
				}
				return nil
			}
			require.NoError(t, runOnceWithin(t, w, h, time.Minute))
			require.Equal(t, 2, handled[itemKey(2)], "handled again after the reset")
			st, err := f.ledger(t, LedgerInline, "").State(context.Background(), skey(itemKey(2)))
			require.NoError(t, err)
			require.Equal(t, StatusDone, st.Status, "the once-job returned with the reset item done")
		})
	}
}
