package follow

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/configerr"
)

// heldBy collects n shards taken by rr.
func heldBy(t *testing.T, rr *running, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		select {
		case e := <-rr.held:
			require.True(t, e.held, "shard %s let go", e.shard)
			got = append(got, e.shard)
		case <-time.After(failsafe):
			t.Fatalf("took %v, want %d shards", got, n)
		}
	}
	slices.Sort(got)
	return got
}

// TestReaderMaxShards: two readers of four shards with MaxShards 2 take two each, and one at its
// MaxShards takes no free shard while another may; once the other reader stops, the shards it
// released are taken beyond MaxShards (after overflowLooks looks), so none is left unread.
func TestReaderMaxShards(t *testing.T) {
	db, table := lockTable(t)
	fs := newFakeStream()
	for _, s := range []string{"shard-1", "shard-2", "shard-3", "shard-4"} {
		fs.addShard(s, "")
		fs.write(s, "k-"+s)
	}
	cfg := ReaderConfig{Streams: fs, StreamARN: fakeARN, Group: "g", MaxShards: 2, PollInterval: 10 * time.Millisecond}
	cfg.Locks = newLocks(t, db, table, "b")
	b := startReader(t, cfg, true)
	ofB := heldBy(t, b, 2)
	cfg.Locks = newLocks(t, db, table, "a")
	a := startReader(t, cfg, true)
	ofA := heldBy(t, a, 2)
	require.Empty(t, slices.DeleteFunc(slices.Clone(ofA), func(s string) bool { return !slices.Contains(ofB, s) }),
		"a shard is read by one reader")
	a.waitLooks(t, 2*overflowLooks)
	select {
	case e := <-a.held:
		t.Fatalf("a reader at MaxShards changed its shards: %+v", e)
	default:
	}

	for _, s := range ofB {
		b.waitSaved(t, s, fs.seqs(s)[0])
	}
	require.ErrorIs(t, b.halt(t), context.Canceled)
	require.Equal(t, ofB, heldBy(t, a, 2), "the shards left free are taken beyond MaxShards")
	for _, st := range a.r.Stats() {
		require.Equal(t, "a", st.Owner, "%s", st.Shard)
		require.Equal(t, fs.seqs(st.Shard)[0], st.Position, "%s", st.Shard)
		if slices.Contains(ofB, st.Shard) {
			require.Zero(t, st.Records, "%s: resumed after b's checkpoint", st.Shard)
		} else {
			require.Equal(t, int64(1), st.Records, "%s", st.Shard)
		}
	}
}

// TestReaderStats: a shard's stats while a batch is out (owner, lag of its oldest record, records),
// once it is Done (position, no lag), and once the shard is closed and read to its end.
func TestReaderStats(t *testing.T) {
	db, table := lockTable(t)
	fs := newFakeStream()
	s := fs.addShard("shard-1", "shard-0")
	fs.write(s, "a", "b")
	rr := startReader(t, ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: newLocks(t, db, table, "a"), Group: "g",
		PollInterval: 10 * time.Millisecond}, false)
	b := rr.nextBatch(t)
	st := rr.stat(t, s)
	require.Equal(t, "a", st.Owner)
	require.Equal(t, "shard-0", st.Parent)
	require.Equal(t, int64(2), st.Records)
	require.Empty(t, st.Position)
	require.GreaterOrEqual(t, st.Lag, time.Hour, "the records are an hour old")
	require.Less(t, st.Lag, 2*time.Hour)

	b.Done()
	rr.waitSaved(t, s, fs.seqs(s)[1])
	st = rr.stat(t, s)
	require.Zero(t, st.Lag)
	require.Equal(t, fs.seqs(s)[1], st.Position)
	require.False(t, st.Finished)

	fs.close(s)
	rr.waitHeld(t, s, false)
	st = rr.stat(t, s)
	require.True(t, st.Finished)
	require.Empty(t, st.Owner)
	require.Equal(t, int64(2), st.Records)
}

// TestNewReaderConfig: each missing or bad field is refused by name; Run needs fn and runs once at
// a time.
func TestNewReaderConfig(t *testing.T) {
	db, table := lockTable(t)
	locks := newLocks(t, db, table, "a")
	fs := newFakeStream()
	good := ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: locks, Group: "g", PollInterval: 10 * time.Millisecond}
	for field, mutate := range map[string]func(c *ReaderConfig){
		"Streams":      func(c *ReaderConfig) { c.Streams = nil },
		"StreamARN":    func(c *ReaderConfig) { c.StreamARN = "" },
		"Locks":        func(c *ReaderConfig) { c.Locks = nil },
		"Group":        func(c *ReaderConfig) { c.Group = "" },
		"MaxShards":    func(c *ReaderConfig) { c.MaxShards = -1 },
		"PollInterval": func(c *ReaderConfig) { c.PollInterval = -time.Second },
	} {
		cfg := good
		mutate(&cfg)
		_, err := NewReader(cfg)
		var ce *configerr.Error
		require.True(t, errors.As(err, &ce), "%s: %v", field, err)
		require.Equal(t, field, ce.Field)
	}
	r, err := NewReader(ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: locks, Group: "g"})
	require.NoError(t, err)
	require.Equal(t, DefaultPollInterval, r.cfg.PollInterval)
	var ce *configerr.Error
	require.ErrorAs(t, r.Run(context.Background(), nil), &ce)

	rr := startReader(t, good, true)
	rr.waitLooks(t, 1)
	require.ErrorIs(t, rr.r.Run(context.Background(), func(context.Context, *Batch) error { return nil }), ErrRunTwice)
}
