package follow

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

// fixedClock is a clock whose Now stands still; its waits are real.
type fixedClock struct{ now time.Time }

func (c *fixedClock) Now() time.Time                         { return c.now }
func (c *fixedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// throughSetup is what ReadThrough's tests start from: a lock client on a fresh lock table, a
// clock standing at now (whole seconds), and an empty fake stream.
func throughSetup(t *testing.T) (*lock.Client, *fixedClock, *fakeStream) {
	t.Helper()
	db, table := lockTable(t)
	return newLocks(t, db, table, "r1"), &fixedClock{time.Now().Truncate(time.Second)}, newFakeStream()
}

// dynamoShardID is a shard id of DynamoDB's form, which carries the shard's creation time.
func dynamoShardID(created time.Time, n int) string {
	return fmt.Sprintf("shardId-%020d-%08x", created.UnixMilli(), n)
}

// TestReadThrough: how far the group has read the stream is the creation time of its oldest
// record after a shard's checkpoint (from the start of a shard without one), over every listed
// shard whose lease is not finished; a shard whose pages run out before a record is read as far
// as its checkpoint's record (it used to read as read to its end: records may lie further on), or
// from the last look that did not list it; a Reader that cannot say answers zero; a checkpoint
// the stream no longer holds is a *TrimmedError.
func TestReadThrough(t *testing.T) {
	ctx := context.Background()
	locks, clock, fs := throughSetup(t)
	now := clock.now
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
	r, err := NewReader(ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: locks, Group: "g", Clock: clock})
	require.NoError(t, err)
	lease := func(shard string) *lock.Lease {
		m := locks.NewMutex(ShardMutex("g", shard))
		ok, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		t.Cleanup(func() { _ = m.Unlock(context.Background()) })
		return m.Lease()
	}
	look := func(want time.Time, why string) {
		t.Helper()
		through, err := r.ReadThrough(ctx)
		require.NoError(t, err)
		require.Equal(t, want, through, why)
	}
	require.NoError(t, lease("s1").FinishAndRelease(ctx, fs.seqs("s1")[0]))
	s2 := lease("s2")
	require.NoError(t, s2.SaveCheckpoint(ctx, fs.seqs("s2")[0]))
	look(now.Add(-2*time.Hour), "s2's record after its checkpoint")

	require.NoError(t, s2.FinishAndRelease(ctx, fs.seqs("s2")[1]))
	look(now.Add(-time.Hour), "s3's oldest record: it has no checkpoint")

	s3 := lease("s3")
	require.NoError(t, s3.SaveCheckpoint(ctx, fs.seqs("s3")[0]))
	look(now.Add(-time.Hour), "s3's pages run out after its checkpoint: read as far as the checkpoint's record, not to its end")

	fs.close("s3")
	require.NoError(t, s3.FinishAndRelease(ctx, fs.seqs("s3")[0]))
	fs.addShard("s4", "s3") // no records, no lease
	clock.now = now.Add(2 * time.Hour)
	look(now, "s4 holds no record from before the last look, which did not list it")

	fresh, err := NewReader(ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: locks, Group: "g", Clock: clock})
	require.NoError(t, err)
	through, err := fresh.ReadThrough(ctx)
	require.NoError(t, err)
	require.Zero(t, through, "a Reader whose first look lists s4 cannot say how far s4 is read")

	at("s4", 0, "e", "f")
	s4 := lease("s4")
	require.NoError(t, s4.SaveCheckpoint(ctx, fs.seqs("s4")[0]))
	fs.trim("s4", 2)
	_, err = r.ReadThrough(ctx)
	var te *TrimmedError
	require.ErrorAs(t, err, &te, "s4's checkpoint is trimmed")
	require.Equal(t, "s4", te.Shard)
	require.True(t, errors.Is(err, ErrTrimmed))
}

// TestReadThroughOnBackends: on DynamoDB Local and moto, a group that has read its shard to the
// last record is read as far as that record (the record at its checkpoint, read with
// AT_SEQUENCE_NUMBER: the pages after it come back empty, which does not prove the shard's end),
// or as the shard's creation when its id says it is younger,
// and a record written after it is the oldest unread; before any checkpoint, the shard's first
// record is.
func TestReadThroughOnBackends(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		ctx := context.Background()
		db, table, arn := streamTable(t)
		ldb, ltable := lockTable(t)
		for i := range 3 {
			put(t, db, table, fmt.Sprint("k", i), 1)
		}
		cfg := ReaderConfig{Streams: ddbtest.Streams(t), StreamARN: arn, Locks: newLocks(t, ldb, ltable, "a"),
			Group: "g", PollInterval: 20 * time.Millisecond}
		look := func() time.Time {
			t.Helper()
			r, err := NewReader(cfg)
			require.NoError(t, err)
			through, err := r.ReadThrough(ctx)
			require.NoError(t, err)
			return through
		}
		created := func(rec stypes.Record) time.Time { return *rec.Dynamodb.ApproximateCreationDateTime }
		before := look()
		a := startReader(t, cfg, true)
		recs, last := collect(t, a, 3)
		require.Equal(t, created(recs[0]), before, "before any checkpoint: the shard's first record")
		for shard, seq := range last {
			a.waitSaved(t, shard, seq)
		}
		require.ErrorIs(t, a.halt(t), context.Canceled)
		require.Len(t, last, 1, "one shard")
		for shard := range last { // (DynamoDB Local rounds record times down to the minute, and its shard may be younger)
			require.Equal(t, maxTime(created(recs[2]), shardCreated(shard, time.Now())), look(), "read as far as the checkpoint's record, not to the end")
		}

		put(t, db, table, "k9", 1)
		through := look()
		b := startReader(t, cfg, true)
		unread, _ := collect(t, b, 1)
		require.ErrorIs(t, b.halt(t), context.Canceled)
		require.Equal(t, created(unread[0]), through, "the record after the checkpoint")
	})
}
