package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// A commit of effects is never turned into a failed attempt by the worker's own write rate
// (helper-71). A commit estimated at more than WriteTimeout of the rate (here 6 WCU at 1 WCU/s
// with a 3 s WriteTimeout) waited for all of it under its write context and was never sent: each
// attempt ended "unknown", the claim expired, and the item was dead-lettered with its effects
// never applied (complete-only: handled again without end). A write now waits for one second of
// the rate; the rest is debt for the next writes.
func TestCommitLargerThanWriteTimeoutOfTheRate(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		for _, completeOnly := range []bool{false, true} {
			if completeOnly && kind == LedgerTable {
				continue
			}
			t.Run(fmt.Sprintf("%s/complete-only=%v", kind, completeOnly), func(t *testing.T) {
				f := newFixture(t, 1)
				counters := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
				c := fastTimings(f.config(kind))
				c.Workers, c.Once, c.Concurrency, c.CompleteOnly = 1, true, 1, completeOnly
				c.WriteRate, c.WriteTimeout, c.ClaimTTL, c.MaxAttempts = 1, 3*time.Second, 2*time.Second, 2
				w, err := New(c)
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				require.NoError(t, w.Run(ctx, WithEffects(func(context.Context, Item) (*Effects, error) {
					var e Effects
					e.Update(counters, Key{"pk": &types.AttributeValueMemberS{Value: "a"}}, ledger.Add("n", 1))
					e.Update(counters, Key{"pk": &types.AttributeValueMemberS{Value: "b"}}, ledger.Add("n", 1))
					return &e, nil
				})))
				require.Equal(t, int64(1), w.Stats().Completed)
				require.Equal(t, int64(0), w.Stats().DeadLettered)
				require.Equal(t, 1, counterOf(t, f, counters, "a"))
			})
		}
	}
}

// A completion the write gate holds past WriteTimeout (commits queued behind each other at a low
// rate) is not sent, and nothing of it applied: the claim is given back without counting an
// attempt (ledger.ErrNotSent), and the item is handled again. Before, the worker took it for a
// write of unknown outcome: the claim expired, the next claim counted an attempt, and with
// MaxAttempts 1 the items were dead-lettered, their handlers having succeeded.
//
// A commit the gate lets through near the end of its WriteTimeout may land with its answer cut by
// the deadline, and the settling read may come before the server applies it: its outcome is
// unknown (OutcomeUnknown, not Completed), and the next pass finds the item done. Such an item is
// done once all the same (CI of e624b82 met one: Completed 7, every item done).
func TestCompletionNotSentGivesTheClaimBack(t *testing.T) {
	f := newFixture(t, 8)
	counters := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once, c.Concurrency = 1, true, 8
	c.WriteRate, c.WriteTimeout, c.ClaimTTL, c.MaxAttempts = 10, 2*time.Second, 5*time.Second, 1
	var unknown atomic.Int64
	c.Hooks.OnItem = func(ev ItemEvent) {
		if ev.Outcome == OutcomeUnknown {
			unknown.Add(1)
		}
	}
	w, err := New(c)
	require.NoError(t, err)
	var mu sync.Mutex
	attempts := map[int]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(t, w.Run(ctx, WithEffects(func(_ context.Context, it Item) (*Effects, error) {
		mu.Lock()
		attempts[it.Attempt]++
		mu.Unlock()
		var e Effects // about 10 WCU: one second of the rate
		for i := range 4 {
			e.Update(counters, Key{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint("c", i)}}, ledger.Add("n", 1))
		}
		return &e, nil
	})))
	st := w.Stats()
	require.Equal(t, int64(8), st.Completed+unknown.Load(), "completed, or completed with the answer lost")
	require.Equal(t, int64(0), st.DeadLettered)
	for i := range 8 {
		s, err := f.ledger(t, LedgerInline, "").State(context.Background(), skey(itemKey(i)))
		require.NoError(t, err)
		require.Equal(t, StatusDone, s.Status, "item %d", i)
	}
	require.Positive(t, st.Released, "some completions were held past WriteTimeout and given back")
	require.Equal(t, map[int]int{1: attempts[1]}, attempts, "no attempt counted for a completion not sent")
	for i := range 4 {
		require.Equal(t, 8, counterOf(t, f, counters, fmt.Sprint("c", i)), "each item's effects applied once")
	}
}

// counterOf is the number n of the counters row pk.
func counterOf(t *testing.T, f *fixture, table, pk string) int {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: Key{"pk": &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	n, ok := out.Item["n"].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	var v int
	_, err = fmt.Sscan(n.Value, &v)
	require.NoError(t, err)
	return v
}
