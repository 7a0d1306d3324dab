package lock

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMutexState: a read that takes nothing follows a mutex through its life (never locked, held
// with a checkpoint, finished and released), and a finished mutex is refused to the next TryLock
// with ErrGroupFinished, as MutexState.Finished says.
func TestMutexState(t *testing.T) {
	ctx := context.Background()
	db, table := lockTable(t)
	a, _ := newClient(t, db, table, WithOwner("a"))
	b, _ := newClient(t, db, table, WithOwner("b"))

	st, err := b.MutexState(ctx, "m")
	require.NoError(t, err)
	require.Equal(t, MutexState{Name: "m"}, st, "never locked")

	m := a.NewMutex("m")
	ok, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, m.Lease().SaveCheckpoint(ctx, "cp-1"))
	st, err = b.MutexState(ctx, "m")
	require.NoError(t, err)
	require.True(t, st.Exists)
	require.True(t, st.Held)
	require.False(t, st.Finished)
	require.Equal(t, "a", st.Owner)
	require.Equal(t, m.Lease().Token(), st.Token)
	require.Equal(t, "cp-1", st.Checkpoint)
	require.Equal(t, m.Lease().ExpiresAt(), st.ExpiresAt)
	again, err := b.NewMutex("m").TryLock(ctx)
	require.NoError(t, err)
	require.False(t, again, "held as MutexState said")

	require.NoError(t, m.Lease().FinishAndRelease(ctx, "end"))
	st, err = b.MutexState(ctx, "m")
	require.NoError(t, err)
	require.False(t, st.Held)
	require.True(t, st.Finished)
	require.Equal(t, "end", st.Checkpoint)
	_, err = b.NewMutex("m").TryLock(ctx)
	require.True(t, errors.Is(err, ErrGroupFinished), "%v", err)

	_, err = b.MutexState(ctx, "")
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
}
