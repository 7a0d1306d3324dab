package follow

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// TestReaderExpiredIterator: an iterator that expired is replaced by one after the checkpoint (the
// last record Done), and reading goes on with nothing skipped or repeated.
func TestReaderExpiredIterator(t *testing.T) {
	db, table := lockTable(t)
	fs := newFakeStream()
	fs.batch = 2
	s := fs.addShard("shard-1", "")
	fs.write(s, "a", "b", "c", "d")
	reads := 0
	fs.setFault(func(op string) error {
		if op == "GetRecords" {
			if reads++; reads == 2 {
				return &stypes.ExpiredIteratorException{Message: aws.String("expired")}
			}
		}
		return nil
	})
	rr := startReader(t, ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: newLocks(t, db, table, "a"), Group: "g",
		PollInterval: 10 * time.Millisecond}, true)
	require.Equal(t, fs.seqs(s)[:2], seqsOf(rr.nextBatch(t).Records))
	require.Equal(t, fs.seqs(s)[2:], seqsOf(rr.nextBatch(t).Records))
	rr.waitSaved(t, s, fs.seqs(s)[3])
	asked := fs.iteratorRequests()
	require.Len(t, asked, 2)
	require.Equal(t, stypes.ShardIteratorTypeTrimHorizon, asked[0].ShardIteratorType)
	require.Equal(t, stypes.ShardIteratorTypeAfterSequenceNumber, asked[1].ShardIteratorType)
	require.Equal(t, fs.seqs(s)[1], aws.ToString(asked[1].SequenceNumber), "after the checkpoint")
	rr.waitLooks(t, 2)
	rr.noBatch(t)
}

// TestReaderTrimmed: a checkpoint older than the stream's retention stops Run with a *TrimmedError
// (ErrTrimmed) naming the shard and the checkpoint; nothing is delivered, the checkpoint stays,
// the lease is released. A stream that is gone or disabled stops Run the same way.
func TestReaderTrimmed(t *testing.T) {
	db, table := lockTable(t)
	locks := newLocks(t, db, table, "a")
	fs := newFakeStream()
	s := fs.addShard("shard-1", "")
	fs.write(s, "a", "b", "c", "d")
	fs.trim(s, 3)
	ctx := context.Background()
	m := locks.NewMutex(ShardMutex("g", s))
	ok, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, m.Lease().SaveCheckpoint(ctx, fs.seqs(s)[1]))
	require.NoError(t, m.Unlock(ctx))

	cfg := ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: locks, Group: "g", PollInterval: 10 * time.Millisecond}
	err = startReader(t, cfg, true).answer(t)
	require.ErrorIs(t, err, ErrTrimmed)
	var te *TrimmedError
	require.ErrorAs(t, err, &te)
	require.Equal(t, s, te.Shard)
	require.Equal(t, fs.seqs(s)[1], te.Checkpoint)
	require.ErrorAs(t, err, new(*stypes.TrimmedDataAccessException))
	st := mutexState(t, locks, "g", s)
	require.False(t, st.Held)
	require.Equal(t, fs.seqs(s)[1], st.Checkpoint)

	// A rescan that began more than Retention ago does not cover records lost since.
	stale := cfg
	stale.Rescanned = time.Now().Add(-Retention - time.Minute)
	require.ErrorIs(t, startReader(t, stale, true).answer(t), ErrTrimmed)

	// Rescanned (a caller that has rescanned): the shard is read from its oldest record.
	restart := cfg
	restart.Rescanned = time.Now()
	rr := startReader(t, restart, false)
	b := rr.nextBatch(t)
	require.Equal(t, fs.seqs(s)[3], *b.Records[0].Dynamodb.SequenceNumber, "the oldest record the stream holds")
	b.Done()
	rr.waitSaved(t, s, fs.seqs(s)[3])
	if err := rr.halt(t); err != nil {
		require.ErrorIs(t, err, context.Canceled, "stopped, not failed")
	}

	fs.setFault(func(op string) error { return &stypes.ResourceNotFoundException{Message: aws.String("gone")} })
	err = startReader(t, cfg, true).answer(t)
	require.True(t, errors.As(err, &te) && te.Shard == "", "%v", err)
	fs.setFault(nil)
	fs.status = stypes.StreamStatusDisabled
	err = startReader(t, cfg, true).answer(t)
	require.True(t, errors.As(err, &te) && te.Shard == "", "%v", err)
}

func throttled() error {
	return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
}

// TestReaderTransientErrors: throttling and connection errors on every call the reader makes
// (DescribeStream, GetShardIterator, GetRecords, and the lock table's checkpoint write) are retried:
// every record arrives once, in order, and Run goes on. An error no retry cures ends Run with it.
func TestReaderTransientErrors(t *testing.T) {
	db, table := lockTable(t)
	fc := ddbfault.New(db)
	var cpFailures atomic.Int32
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		if strings.HasPrefix(aws.ToString(in.UpdateExpression), "SET #cp") && cpFailures.Add(1) == 1 {
			return nil, errors.New("connection reset by peer")
		}
		return send(ctx, call.In)
	}, ddbfault.OpUpdateItem)
	fs := newFakeStream()
	fs.batch = 1
	s := fs.addShard("shard-1", "")
	fs.write(s, "a", "b", "c")
	calls := map[string]int{}
	fs.setFault(func(op string) error {
		calls[op]++
		switch n := calls[op]; {
		case op == "DescribeStream" && n <= 2, op == "GetRecords" && n == 2:
			return throttled()
		case op == "GetShardIterator" && n == 1:
			return errors.New("dial tcp: connection refused")
		}
		return nil
	})
	rr := startReader(t, ReaderConfig{Streams: fs, StreamARN: fakeARN, Locks: newLocks(t, fc, table, "a"), Group: "g",
		PollInterval: 10 * time.Millisecond}, true)
	for _, seq := range fs.seqs(s) {
		require.Equal(t, []string{seq}, seqsOf(rr.nextBatch(t).Records))
	}
	rr.waitSaved(t, s, fs.seqs(s)[2])
	rr.waitLooks(t, 2)
	rr.noBatch(t)
	select {
	case err := <-rr.result:
		t.Fatalf("Run returned %v", err)
	default:
	}
	require.GreaterOrEqual(t, cpFailures.Load(), int32(2), "a checkpoint write failed and was retried")
	fs.mu.Lock()
	require.Equal(t, 2, calls["GetShardIterator"], "asked again after the failure, and kept through the throttling")
	require.Greater(t, calls["DescribeStream"], 2)
	fs.mu.Unlock()

	fs.setFault(func(op string) error {
		return &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no"}
	})
	err := rr.answer(t)
	var api smithy.APIError
	require.True(t, errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException", "%v", err)
}
