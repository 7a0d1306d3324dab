package follow

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// shardFamily is a stream of a closed parent shard (records of k1, k2, k1; two per page), its open
// child (k1, k2), and a shard whose parent was trimmed away (k3).
func shardFamily() (fs *fakeStream, parent, child, orphan string) {
	fs = newFakeStream()
	fs.batch = 2
	parent = fs.addShard("shard-1-parent", "")
	fs.write(parent, "k1", "k2", "k1")
	fs.close(parent)
	child = fs.addShard("shard-2-child", parent)
	fs.write(child, "k1", "k2")
	orphan = fs.addShard("shard-3-orphan", "shard-0-trimmed-away")
	fs.write(orphan, "k3")
	return fs, parent, child, orphan
}

// TestReaderLineage: a child shard is read only once its parent is closed, read to its end and
// marked finished in the lock table, so the records of k1 (parent, parent, child) arrive in write
// order; a shard whose parent was trimmed away is read at once, alongside. A second reader of the
// group reads neither the finished parent nor the records Done, only what came since.
func TestReaderLineage(t *testing.T) {
	db, table := lockTable(t)
	locks := newLocks(t, db, table, "a")
	fs, p, c, o := shardFamily()
	cfg := ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: locks, Group: "g", PollInterval: 10 * time.Millisecond}
	rr := startReader(t, cfg, false)

	got := map[string][]*Batch{}
	for len(got[p]) == 0 || len(got[o]) == 0 {
		b := rr.nextBatch(t)
		got[b.Shard] = append(got[b.Shard], b)
	}
	require.Empty(t, got[c], "the child waits for its parent")
	require.Equal(t, fs.seqs(p)[:2], seqsOf(got[p][0].Records))
	require.Equal(t, fs.seqs(o), seqsOf(got[o][0].Records))
	got[o][0].Done()
	got[p][0].Done()
	last := rr.nextBatch(t)
	require.Equal(t, p, last.Shard, "the orphan has nothing more; the child still waits")
	require.Equal(t, fs.seqs(p)[2:], seqsOf(last.Records))
	require.False(t, mutexState(t, locks, "g", p).Finished, "not finished while its last batch is out")
	last.Done()

	child := rr.nextBatch(t)
	require.Equal(t, c, child.Shard)
	st := mutexState(t, locks, "g", p)
	require.True(t, st.Finished, "the child is read only once its parent is finished")
	require.False(t, st.Held, "finishing releases the parent")
	require.Equal(t, fs.seqs(p)[2], st.Checkpoint)
	require.Equal(t, fs.seqs(c), seqsOf(child.Records))
	child.Done()
	rr.waitSaved(t, c, fs.seqs(c)[1])
	require.True(t, rr.stat(t, p).Finished)
	require.ErrorIs(t, rr.halt(t), context.Canceled)
	for _, s := range []string{p, c, o} {
		require.False(t, mutexState(t, locks, "g", s).Held, "Run released %s", s)
	}

	fs.write(c, "k1")
	cfg.Locks = newLocks(t, db, table, "b")
	rr2 := startReader(t, cfg, true)
	again := rr2.nextBatch(t)
	require.Equal(t, c, again.Shard)
	require.Equal(t, fs.seqs(c)[2:], seqsOf(again.Records), "only the record written since")
	rr2.waitSaved(t, c, fs.seqs(c)[2])
	rr2.waitLooks(t, 2)
	rr2.noBatch(t)
	require.True(t, rr2.stat(t, p).Finished)
	require.ErrorIs(t, rr2.halt(t), context.Canceled)
	close(rr2.held)
	for e := range rr2.held {
		require.NotEqual(t, p, e.shard, "the finished parent is never taken again")
	}
}
