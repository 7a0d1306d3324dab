package lock

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// FinishAndRelease marks the slot finished, stores the checkpoint and releases the lease in one
// request; the group of one slot is then finished for everyone.
func TestFinishAndReleaseIsOneWrite(t *testing.T) {
	ctx := context.Background()
	k := countedClient(t)
	f, a := k.f, k.a
	l, err := a.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)

	before := f.calls.Load()
	require.NoError(t, l.FinishAndRelease(ctx, "the end"))
	require.Equal(t, int64(1), f.calls.Load()-before, "requests of FinishAndRelease")
	require.ErrorIs(t, l.Err(), ErrReleased)
	require.NoError(t, l.Release(ctx), "a later Release is a no-op")
	require.Equal(t, int64(1), f.calls.Load()-before, "the no-op Release sent nothing")

	st, err := a.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.Len(t, st.Slots, 1)
	s := st.Slots[0]
	require.True(t, s.Finished)
	require.True(t, s.Released)
	require.Equal(t, "the end", s.Checkpoint)

	b, _ := newClient(t, k.db, k.table, timingOpts(k.clk, "b")...)
	_, err = b.TryAcquireSlot(ctx, "g", 0)
	require.ErrorIs(t, err, ErrGroupFinished)
}

// A FinishAndRelease whose write fails in transit (not applied, or applied with the answer lost)
// reports the error; the Release that follows (runSlot's deferred one) sends the same write, so
// the slot ends finished, released and checkpointed either way.
func TestFinishAndReleaseRetriesTheSameWrite(t *testing.T) {
	for _, fault := range []string{"dropped", "answer lost"} {
		t.Run(fault, func(t *testing.T) {
			ctx := context.Background()
			k := countedClient(t)
			f, a := k.f, k.a
			l, err := a.TryAcquireSlot(ctx, "g", 1)
			require.NoError(t, err)

			if fault == "dropped" {
				f.dropWrites.Store(true)
			} else {
				f.failAfterUpdates.Store(1)
			}
			err = l.FinishAndRelease(ctx, "cp")
			require.ErrorIs(t, err, errInjected)
			require.NotErrorIs(t, err, ErrLeaseLost)
			f.dropWrites.Store(false)
			delivered := f.updatesDelivered.Load()
			require.NoError(t, l.Release(ctx))
			require.Equal(t, delivered+1, f.updatesDelivered.Load(), "the retry is one write")

			st, err := a.GroupStatus(ctx, "g")
			require.NoError(t, err)
			s := st.Slots[0]
			require.True(t, s.Finished, "finished by the retried write")
			require.True(t, s.Released)
			require.Equal(t, "cp", s.Checkpoint)
		})
	}
}
