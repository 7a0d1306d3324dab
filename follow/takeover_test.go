package follow

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

var errKilled = errors.New("the process is dead")

// killable is a lock client whose calls all fail, unsent, once killed: a process SIGKILLed leaves
// its leases unrenewed and writes nothing more.
func killable(t *testing.T, db *dynamodb.Client, table, owner string, opts ...lock.Option) (*lock.Client, *atomic.Bool) {
	t.Helper()
	var dead atomic.Bool
	fc := ddbfault.New(db)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if dead.Load() {
			return nil, errKilled
		}
		return send(ctx, call.In)
	})
	return newLocks(t, fc, table, owner, opts...), &dead
}

// TestReaderTakeover: reader a holds the shard, its first batch Done and checkpointed, its second
// out; a's process dies. a stops reading once its lease runs out, and reader b, standing by, takes
// the shard after the lease's TTL and resumes from a's checkpoint: the batch a had not Done comes
// again, no record a had Done does. a's late Done changes nothing.
func TestReaderTakeover(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		db, table, arn := streamTable(t)
		ldb, ltable := lockTable(t)
		fast := []lock.Option{lock.WithLeaseTTL(2 * time.Second), lock.WithMaxClockSkew(100 * time.Millisecond)}
		locksA, dead := killable(t, ldb, ltable, "a", fast...)
		cfg := ReaderConfig{Streams: ddbtest.Streams(t), StreamARN: arn, Locks: locksA, Group: "g",
			PollInterval: 20 * time.Millisecond}
		for i := range 5 {
			put(t, db, table, fmt.Sprint("w1-", i), 1)
		}
		a := startReader(t, cfg, false)
		var shard, cp string
		for n := 0; n < 5; {
			b := a.nextBatch(t)
			n += len(b.Records)
			shard, cp = b.Shard, b.last()
			b.Done()
		}
		a.waitSaved(t, shard, cp)
		cfg.Locks = newLocks(t, ldb, ltable, "b", fast...)
		b := startReader(t, cfg, false)
		b.waitLooks(t, 1)

		for i := range 5 {
			put(t, db, table, fmt.Sprint("w2-", i), 1)
		}
		out := a.nextBatch(t)
		dead.Store(true)
		a.waitHeld(t, shard, false)
		again := b.nextBatch(t)
		require.Equal(t, shard, again.Shard)
		require.Equal(t, seqsOf(out.Records)[0], seqsOf(again.Records)[0], "b starts with the batch a had not Done")
		recs := again.Records
		again.Done()
		for len(recs) < 5 {
			more := b.nextBatch(t)
			recs = append(recs, more.Records...)
			more.Done()
		}
		for _, s := range seqsOf(recs) {
			require.True(t, seqAfter(s, cp), "record %s was Done by a (checkpoint %s)", s, cp)
		}
		last := seqsOf(recs)[len(recs)-1]
		b.waitSaved(t, shard, last)

		dead.Store(false)
		out.Done()
		a.waitLooks(t, 3)
		require.Equal(t, cp, a.stat(t, shard).Position)
		st := mutexState(t, cfg.Locks, "g", shard)
		require.Equal(t, last, st.Checkpoint, "a's late Done moved nothing")
		require.Equal(t, "b", st.Owner)
		require.True(t, st.Held)
	})
}

// TestReaderStreamDisabled: a stream turned off ends Run with a *TrimmedError for the stream (the
// table's later writes are in no stream the reader reads), and the shard leases are released.
func TestReaderStreamDisabled(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, be ddbtest.Backend) {
		be.Require(t, ddbtest.CapStreams)
		db, table, arn := streamTable(t)
		ldb, ltable := lockTable(t)
		put(t, db, table, "k", 1)
		cfg := ReaderConfig{Streams: ddbtest.Streams(t), StreamARN: arn, Locks: newLocks(t, ldb, ltable, "a"),
			Group: "g", PollInterval: 20 * time.Millisecond}
		a := startReader(t, cfg, true)
		shard := a.nextBatch(t).Shard
		_, err := db.UpdateTable(context.Background(), &dynamodb.UpdateTableInput{TableName: aws.String(table),
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}})
		require.NoError(t, err)
		err = a.answer(t)
		var te *TrimmedError
		require.ErrorAs(t, err, &te)
		require.ErrorIs(t, err, ErrTrimmed)
		require.Empty(t, te.Shard)
		require.Contains(t, te.Reason, "DISABL")
		require.False(t, mutexState(t, cfg.Locks, "g", shard).Held)
	})
}
