package follow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadThroughAcrossReaderRestarts (found by a review of 4463f7f): a group that keeps up, on a
// stream shaped as DynamoDB's (every shard closes about every 4 hours and a child takes over), on
// a table with three idle partitions (their shards, staggered, never get a record) and a busy one
// whose every record is read at once. The slot's Reader is started again every 3 hours (a worker
// redeployed, a resize, a reader that failed), and the worker looks how far the group has read
// every 29 minutes, saving since = max(since, answer) as keepFollowing does. A new Reader knew no
// listing before its first, so each idle shard without a checkpoint answered "cannot say" until
// it closed, since never moved, and the worker rescanned the whole table every 23 hours. Now such
// a shard is bounded by the creation time its id carries. The control never starts a new Reader.
func TestReadThroughAcrossReaderRestarts(t *testing.T) {
	for _, restartEvery := range []time.Duration{3 * time.Hour, 1000 * time.Hour} {
		t.Run(fmt.Sprintf("restart-every=%s", restartEvery), func(t *testing.T) { readThroughAcrossRestarts(t, restartEvery) })
	}
}

func readThroughAcrossRestarts(t *testing.T, restartEvery time.Duration) {
	ctx := context.Background()
	locks, clock, fs := throughSetup(t)
	start, shardID := clock.now, dynamoShardID
	const rollover, lookEvery, idle = 4 * time.Hour, 29 * time.Minute, 3
	leaf, gen := make([]string, idle), make([]int, idle) // idle partition i's open shard
	for i := range idle {
		leaf[i] = fs.addShard(shardID(start, i), "")
	}
	busyID := fs.addShard(shardID(start, 99), "")
	busy := locks.NewMutex(ShardMutex("g", busyID))
	ok, err := busy.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	t.Cleanup(func() { _ = busy.Unlock(context.Background()) })

	newReader := func() *Reader {
		r, err := NewReader(ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: locks, Group: "g", Clock: clock})
		require.NoError(t, err)
		return r
	}
	r, born := newReader(), start
	since, worst := start, time.Duration(0) // since: the pass the slot followed from
	for now := start.Add(lookEvery); now.Before(start.Add(48 * time.Hour)); now = now.Add(lookEvery) {
		clock.now = now
		for i := range idle { // the rollovers due by now (partition i's at i*rollover/idle, then every rollover)
			phase := time.Duration(i) * rollover / idle
			for due := start.Add(phase + time.Duration(gen[i]+1)*rollover); !due.After(now); due = due.Add(rollover) {
				fs.close(leaf[i])
				gen[i]++
				leaf[i] = fs.addShard(shardID(due, gen[i]*idle+i), leaf[i])
			}
		}
		fs.mu.Lock()
		fs.created = now.Add(-time.Minute) // the busy partition: a record a minute ago, read at once
		fs.mu.Unlock()
		fs.write(busyID, "k")
		seqs := fs.seqs(busyID)
		require.NoError(t, busy.Lease().SaveCheckpoint(ctx, seqs[len(seqs)-1]))

		if now.Sub(born) >= restartEvery {
			r, born = newReader(), now
		}
		through, err := r.ReadThrough(ctx)
		require.NoError(t, err)
		since = maxTime(since, through)
		worst = max(worst, now.Sub(since))
	}
	require.Less(t, worst, SafeAge(Retention), "a group that reads every record as it comes was judged behind by the retention")
	require.Less(t, worst, 2*rollover, "how far the group has read lags by more than two rollovers")
}

// TestShardCreated: the creation time in a DynamoDB shard id; zero for other ids and implausible
// times.
func TestShardCreated(t *testing.T) {
	now := time.UnixMilli(1795752268895)
	require.Equal(t, time.UnixMilli(1795752268892), shardCreated("shardId-00000001795752268892-9c0feef8", now))
	require.Equal(t, time.UnixMilli(1414562045508), shardCreated("shardId-00000001414562045508-2bac9cd2", now))
	for _, id := range []string{"s1", "shardId-1795752268892-9c0feef8", "shardId-00000001795752268892", "shard-00000001795752268892-9c",
		"shardId-0000000179575226889x-9c0feef8", "shardId-00000000000000000001-9c0feef8", "shardId-00000001895752268892-9c0feef8"} {
		require.Zero(t, shardCreated(id, now), id)
	}
}
