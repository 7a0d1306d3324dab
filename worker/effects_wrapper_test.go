package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// A wrapper between Run and a WithEffects handler that passes on a new Item built from the one it
// got (a middleware that decrypts Attrs) and Run's context commits the effects; before, they went
// back through the Item alone, and were dropped while the item was completed (helper-73). One that
// passes neither fails the attempt permanently: the item is not completed without its effects.
func TestEffectsThroughAWrapper(t *testing.T) {
	for _, c := range []struct {
		name      string
		ctx       func(context.Context) context.Context
		completed int64
	}{
		{"Run's context", func(ctx context.Context) context.Context { return ctx }, 3},
		{"another context", func(context.Context) context.Context { return context.Background() }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 3)
			counters := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
			cfg := fastTimings(f.config(LedgerInline))
			cfg.Workers, cfg.Once = 1, true
			w, err := New(cfg)
			require.NoError(t, err)
			inner := WithEffects(func(context.Context, Item) (*Effects, error) {
				return (&Effects{}).Update(counters, Key{"pk": &types.AttributeValueMemberS{Value: "n"}}, ledger.Add("n", 1)), nil
			})
			var lastErr atomic.Value
			wrapper := func(ctx context.Context, it Item) error {
				fresh := Item{Key: it.Key, Attrs: it.Attrs, Attempt: it.Attempt, Slot: it.Slot, Token: it.Token}
				err := inner(c.ctx(ctx), fresh)
				if err != nil {
					lastErr.Store(err)
				}
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, w.Run(ctx, wrapper))
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
