package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// The attempts of complete-only mode: the handler is told the attempt it makes, and an item done
// in one pass is not handled in the next (the deterministic fault sweep, internal/sweep, found
// both after the holes of issue 12 were closed).

// TestCompleteOnlyTellsTheAttempt: in complete-only mode a handler is told the attempt it makes, so
// one that fails its first attempt succeeds on its second, instead of failing every attempt (the
// item was dead-lettered with "attempt 1" three times).
func TestCompleteOnlyTellsTheAttempt(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 3
			f := newFixture(t, n)
			w, err := New(completeOnlyOnce(f, kind))
			require.NoError(t, err)
			hc := newHandlerCalls()
			require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error {
				hc.record(it)
				if it.Attempt == 1 {
					return errors.New("first attempt fails")
				}
				return nil
			}, time.Minute))
			for i := range n {
				requireStatus(t, f, kind, itemKey(i), StatusDone)
				require.Equal(t, []int{1, 2}, hc.attempts[itemKey(i)], "item %d", i)
			}
		})
	}
}

// TestCompleteOnlyHandlesADoneItemNoMore: a later pass of a complete-only run does not call the
// handler again for items finished in an earlier pass (with the table ledger the scan cannot see
// the item's state, and every pass handled every item again).
func TestCompleteOnlyHandlesADoneItemNoMore(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 4
			f := newFixture(t, n)
			w, err := New(completeOnlyOnce(f, kind))
			require.NoError(t, err)
			hc := newHandlerCalls()
			require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error {
				hc.record(it)
				if it.Key["id"].(*types.AttributeValueMemberS).Value == itemKey(0) && it.Attempt == 1 {
					return errors.New("item 0 fails once: a second pass runs")
				}
				return nil
			}, time.Minute))
			require.Equal(t, 2, hc.calls[itemKey(0)])
			for i := 1; i < n; i++ {
				requireStatus(t, f, kind, itemKey(i), StatusDone)
				require.Equal(t, 1, hc.calls[itemKey(i)], "item %d handled again in the second pass", i)
			}
		})
	}
}

// completeOnlyOnce is a once-run of one complete-only worker with quick retries.
func completeOnlyOnce(f *fixture, kind LedgerKind) Config {
	c := f.config(kind)
	c.Workers, c.Once, c.CompleteOnly, c.MaxAttempts = 1, true, true, 3
	c.RetryBackoff, c.MaxRetryBackoff, c.PollInterval = 10*time.Millisecond, 20*time.Millisecond, 50*time.Millisecond
	return c
}
