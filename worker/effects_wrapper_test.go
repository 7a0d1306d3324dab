package worker

import (
	"context"
	"errors"
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

// countEffect is a WithEffects handler adding 1 to the row pk of counters.
func countEffect(counters, pk string) Handler {
	return WithEffects(func(context.Context, Item) (*Effects, error) {
		return (&Effects{}).Update(counters, Key{"pk": &types.AttributeValueMemberS{Value: pk}}, ledger.Add("n", 1)), nil
	})
}

// A wrapper between Run and a WithEffects handler that passes on a copy of the Item (with its
// Attrs changed: a middleware that decodes them) commits the effects. One that builds a new Item
// from its fields fails the attempt permanently: before, the effects were dropped while the item
// completed (helper-73).
func TestEffectsThroughAWrapper(t *testing.T) {
	for _, c := range []struct {
		name      string
		pass      func(Item) Item
		completed int64
	}{
		{"a copy", func(it Item) Item {
			it2 := it
			it2.Attrs = map[string]types.AttributeValue{"decoded": it.Key["id"]}
			return it2
		}, 3},
		{"a new Item", func(it Item) Item { return Item{Key: it.Key, Attrs: it.Attrs, Attempt: it.Attempt, Slot: it.Slot} }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 3)
			counters := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
			cfg := fastTimings(f.config(LedgerInline))
			cfg.Workers, cfg.Once = 1, true
			w, err := New(cfg)
			require.NoError(t, err)
			inner := countEffect(counters, "n")
			var lastErr atomic.Value
			wrapper := func(ctx context.Context, it Item) error {
				err := inner(ctx, c.pass(it))
				if err != nil {
					lastErr.Store(err)
				}
				return err
			}
			require.NoError(t, runOnceWithin(t, w, wrapper, time.Minute))
			st := w.Stats()
			require.Equal(t, c.completed, st.Completed)
			require.Equal(t, int(c.completed), counterOf(t, f, counters, "n"), "every completed item's effect, once")
			if c.completed == 0 {
				require.Equal(t, int64(3), st.DeadLettered)
				err, _ := lastErr.Load().(error)
				require.True(t, errors.Is(err, ErrEffectsNotCarried), "%v", err)
			}
		})
	}
}

// A router that runs two WithEffects handlers on one item, both returning effects, fails the
// attempt (ErrEffectsTwice): keeping one would drop the other's while the item completed
// (helper-74: the first's were lost). One of them returning none is fine.
func TestEffectsOfTwoCallsForOneItem(t *testing.T) {
	f := newFixture(t, 3)
	counters := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
	cfg := fastTimings(f.config(LedgerInline))
	cfg.Workers, cfg.Once = 1, true
	w, err := New(cfg)
	require.NoError(t, err)
	none := WithEffects(func(context.Context, Item) (*Effects, error) { return &Effects{}, nil })
	hs := []Handler{countEffect(counters, "a"), none, countEffect(counters, "b")}
	router := func(ctx context.Context, it Item) error {
		for _, h := range hs {
			if err := h(ctx, it); err != nil {
				return err
			}
		}
		return nil
	}
	require.NoError(t, runOnceWithin(t, w, router, time.Minute))
	st := w.Stats()
	require.Equal(t, int64(0), st.Completed)
	require.Equal(t, int64(3), st.DeadLettered)
	require.Zero(t, counterOf(t, f, counters, "a")+counterOf(t, f, counters, "b"), "nothing of either committed")
	s, err := f.ledger(t, LedgerInline, "").Summarize(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(3), s.Failed)
}

// A batching middleware that runs the inner handler for every item of a batch from one of their
// calls, each with its own Item: each item's effects commit with its own completion (helper-74's
// batch, where Run's context would have carried them all to the filling call's item).
func TestEffectsOfABatchEachOnItsItem(t *testing.T) {
	f := newFixture(t, 3)
	cfg := fastTimings(f.config(LedgerInline))
	cfg.Workers, cfg.Once, cfg.Concurrency = 1, true, 3
	w, err := New(cfg)
	require.NoError(t, err)
	inner := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
		return (&Effects{}).Item(ledger.Set("mark", it.Key["id"])), nil
	})
	var mu sync.Mutex
	var batch []Item
	done := make(chan struct{})
	batcher := func(ctx context.Context, it Item) error {
		mu.Lock()
		batch = append(batch, it)
		full := len(batch) == 3
		mu.Unlock()
		if !full {
			select {
			case <-done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		defer close(done)
		for i := len(batch) - 1; i >= 0; i-- {
			if err := inner(ctx, batch[i]); err != nil {
				return err
			}
		}
		return nil
	}
	require.NoError(t, runOnceWithin(t, w, batcher, time.Minute))
	require.Equal(t, int64(3), w.Stats().Completed)
	for i := range 3 {
		out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table),
			Key: Key{"id": &types.AttributeValueMemberS{Value: itemKey(i)}}, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Equal(t, &types.AttributeValueMemberS{Value: itemKey(i)}, out.Item["mark"], "its own change, on it")
	}
}
