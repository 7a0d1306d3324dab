package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// Two groups on one table: a live claim of group A is not taken at once by group B, though B's
// lease token for the same slot number is larger. Tokens count per group and lease table, so only
// a newer token of the same slot of the same group may take a claim before its claim TTL.
func TestInstantReclaimIsScopedToTheGroup(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 1)
			ctx := context.Background()
			a := fastTimings(f.config(kind))
			a.Workers, a.Once, a.Group, a.Owner, a.ClaimTTL = 1, true, "group-a", "a", time.Minute
			b := a
			b.Once, b.Group, b.Owner = false, "group-b", "b"

			// Group B's slot 0 has been held once before: its next token (2) beats A's (1).
			old, err := lock.New(f.db, f.leaseTable, lock.WithOwner("b-before"))
			require.NoError(t, err)
			bd := b.withDefaults()
			l, err := old.AcquireSlot(ctx, bd.Group, 1, lock.WithGroupMeta(testGroupMeta(bd)))
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))

			started, releaseA := make(chan struct{}), make(chan struct{})
			wa, err := New(a)
			require.NoError(t, err)
			aDone := make(chan error, 1)
			go func() {
				aDone <- wa.Run(ctx, func(context.Context, Item) error {
					close(started)
					<-releaseA
					return nil
				})
			}()
			recvOrFail(t, started, "A's handler")

			seen := make(chan Outcome, 16)
			b.Hooks.OnItem = func(e ItemEvent) { seen <- e.Outcome }
			wb, err := New(b)
			require.NoError(t, err)
			bctx, stopB := context.WithCancel(ctx)
			bDone := make(chan error, 1)
			go func() {
				bDone <- wb.Run(bctx, func(context.Context, Item) error { return nil })
			}()
			first := recvOrFail(t, seen, "B's first look at the item")
			stopB()
			<-bDone
			close(releaseA)
			require.NoError(t, <-aDone)
			require.Equal(t, OutcomeSkipped, first, "B must leave A's live claim alone")
			require.EqualValues(t, 1, wa.Stats().Completed)
			require.Zero(t, wb.Stats().Claimed)
		})
	}
}

func recvOrFail[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}
