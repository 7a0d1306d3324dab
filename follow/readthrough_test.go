package follow

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// fixedClock is a clock whose Now stands still; its waits are real.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time                         { return c.now }
func (c fixedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestReadThrough: how far the group has read the stream is the creation time of its oldest
// record after a shard's checkpoint (from the start of a shard without one), over every listed
// shard whose lease is not finished; now when every shard is read to its last record; a
// checkpoint the stream no longer holds is a *TrimmedError.
func TestReadThrough(t *testing.T) {
	ctx := context.Background()
	db, table := lockTable(t)
	locks := newLocks(t, db, table, "r1")
	now := time.Now().Truncate(time.Second)
	fs := newFakeStream()
	at := func(shard string, age time.Duration, keys ...string) {
		fs.mu.Lock()
		fs.created = now.Add(-age)
		fs.mu.Unlock()
		fs.write(shard, keys...)
	}
	fs.addShard("s1", "")
	at("s1", 10*time.Hour, "a") // finished: never counted
	fs.close("s1")
	fs.addShard("s2", "s1")
	at("s2", 3*time.Hour, "b")
	at("s2", 2*time.Hour, "c")
	fs.close("s2")
	fs.addShard("s3", "s2") // no lease: counted from its oldest record
	at("s3", time.Hour, "d")
	fs.addShard("s4", "") // no records
	r, err := NewReader(ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: locks, Group: "g", Clock: fixedClock{now}})
	require.NoError(t, err)
	lease := func(shard string) *lock.Lease {
		m := locks.NewMutex(ShardMutex("g", shard))
		ok, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		t.Cleanup(func() { _ = m.Unlock(context.Background()) })
		return m.Lease()
	}
	require.NoError(t, lease("s1").FinishAndRelease(ctx, fs.seqs("s1")[0]))
	s2 := lease("s2")
	require.NoError(t, s2.SaveCheckpoint(ctx, fs.seqs("s2")[0]))

	through, err := r.ReadThrough(ctx)
	require.NoError(t, err)
	require.Equal(t, now.Add(-2*time.Hour), through, "s2's record after its checkpoint")

	require.NoError(t, s2.FinishAndRelease(ctx, fs.seqs("s2")[1]))
	through, err = r.ReadThrough(ctx)
	require.NoError(t, err)
	require.Equal(t, now.Add(-time.Hour), through, "s3's oldest record: it has no checkpoint")

	s3 := lease("s3")
	require.NoError(t, s3.SaveCheckpoint(ctx, fs.seqs("s3")[0]))
	through, err = r.ReadThrough(ctx)
	require.NoError(t, err)
	require.Equal(t, now, through, "every record read")

	at("s3", 0, "e")
	fs.trim("s3", 2)
	_, err = r.ReadThrough(ctx)
	var te *TrimmedError
	require.ErrorAs(t, err, &te, "s3's checkpoint is trimmed")
	require.Equal(t, "s3", te.Shard)
	require.True(t, errors.Is(err, ErrTrimmed))
}
