package follow

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReaderStopWithBatchOut: Run stopped while a batch is out and not Done releases the shard
// without moving its checkpoint, so the next reader delivers that batch again; a batch Done as Run
// stops is checkpointed before the release, so the next reader does not.
func TestReaderStopWithBatchOut(t *testing.T) {
	db, table := lockTable(t)
	fs := newFakeStream()
	s := fs.addShard("shard-1", "")
	fs.write(s, "a", "b")
	cfg := ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: newLocks(t, db, table, "a"), Group: "g",
		PollInterval: 10 * time.Millisecond}
	a := startReader(t, cfg, false)
	out := a.nextBatch(t)
	require.ErrorIs(t, a.halt(t), context.Canceled)
	out.Done() // after Run returned: no effect
	st := mutexState(t, cfg.Locks, "g", s)
	require.False(t, st.Held)
	require.Empty(t, st.Checkpoint, "a batch not Done is not checkpointed")

	cfg.Locks = newLocks(t, db, table, "b")
	b := startReader(t, cfg, false)
	again := b.nextBatch(t)
	require.Equal(t, seqsOf(out.Records), seqsOf(again.Records), "delivered again")
	again.Done()
	b.waitSaved(t, s, fs.seqs(s)[1])
	require.ErrorIs(t, b.halt(t), context.Canceled)

	// Done when the Run's context has ended already: the reader sees both at once, and saves.
	for i := range 4 {
		fs.write(s, "c")
		r, err := NewReader(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		err = r.Run(ctx, func(fctx context.Context, b *Batch) error {
			cancel()
			<-fctx.Done()
			b.Done()
			return nil
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, fs.seqs(s)[2+i], mutexState(t, cfg.Locks, "g", s).Checkpoint, "Done as Run stopped: saved")
	}

	cfg.Locks = newLocks(t, db, table, "c")
	c := startReader(t, cfg, true)
	c.waitHeld(t, s, true)
	c.waitLooks(t, 2)
	c.noBatch(t)
}
