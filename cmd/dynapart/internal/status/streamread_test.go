package status

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

// fakeStream is a stream of two shards, shard-1 and its child shard-2, each with one record
// created at created after any position; it counts its calls. A fake: the pacing and the
// states of a read are pure logic (the shards' leases are real, on DynamoDB Local).
type fakeStream struct {
	created time.Time

	mu      sync.Mutex
	calls   map[string]int
	fail    error           // DescribeStream's answer while set
	trimmed map[string]bool // shards whose records after any position are gone
}

func (f *fakeStream) count(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[call]++
}

func (f *fakeStream) callsOf(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

func (f *fakeStream) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.count("DescribeStream")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: &stypes.StreamDescription{StreamArn: in.StreamArn,
		Shards: []stypes.Shard{{ShardId: aws.String("shard-2"), ParentShardId: aws.String("shard-1")}, {ShardId: aws.String("shard-1")}}}}, nil
}

func (f *fakeStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f.count("GetShardIterator")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.trimmed[aws.ToString(in.ShardId)] {
		return nil, &stypes.TrimmedDataAccessException{Message: aws.String("trimmed")}
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: in.ShardId}, nil
}

func (f *fakeStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.count("GetRecords")
	return &dynamodbstreams.GetRecordsOutput{Records: []stypes.Record{{Dynamodb: &stypes.StreamRecord{
		SequenceNumber: aws.String("100"), ApproximateCreationDateTime: aws.Time(f.created)}}}}, nil
}

// streamTable is a table described with its stream on.
type streamTable struct{}

func (streamTable) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{LatestStreamArn: aws.String("arn:stream"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: follow.ViewType}}}, nil
}

// TestStreamReadPacing: the stream is read only for a group that follows it, at most every
// streamEvery however often the page samples; a shard's lease gives its owner, position and
// finished flag, a finished shard is not read for its lag and its lease is not read again; a
// shard whose records after its position are trimmed says so; a failed read keeps the last one.
func TestStreamReadPacing(t *testing.T) {
	ctx := context.Background()
	db := ddbtest.Client(t)
	leases := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(ctx, db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	leaseReads := &readMeter{}
	locks, err := lock.New(meteredLeaseDB{db, leaseReads}, leases)
	require.NoError(t, err)
	t0 := time.UnixMilli(1_750_000_000_000)
	fs := &fakeStream{created: t0.Add(-7 * time.Second), calls: map[string]int{}, trimmed: map[string]bool{"shard-2": true}}
	w := newStreamWatch(fs, streamTable{}, locks, "g")

	scanning := &lock.GroupStatus{Meta: map[string]string{"table": "t"}, Slots: []lock.SlotStatus{{Checkpoint: "dp3|0.2|0|0|0.0.0.0|{}"}}}
	require.Nil(t, w.doc(ctx, scanning, t0), "no slot follows the stream")
	require.Zero(t, fs.callsOf("DescribeStream"))
	following := &lock.GroupStatus{Meta: map[string]string{"table": "t"}, Slots: []lock.SlotStatus{{Checkpoint: "dp3|0.2|1|0|5.0.5.1000|follow"}}}

	d := w.doc(ctx, following, t0)
	require.Equal(t, "arn:stream", d.ARN)
	require.Equal(t, []string{"shard-1", "shard-2"}, []string{d.Shards[0].Shard, d.Shards[1].Shard}, "by shard id")
	require.Equal(t, "shard-1", d.Shards[1].Parent)
	require.Equal(t, 7.0, *d.Shards[0].LagSeconds, "the age of the record after its (absent) position")
	require.Nil(t, d.Shards[1].LagSeconds)
	require.Equal(t, errTrimmedLag.Error(), d.Shards[1].Error)
	require.Equal(t, 7.0, *d.LagSeconds)
	require.Empty(t, d.Shards[0].Owner)
	leaseGets, _ := leaseReads.total()
	require.Equal(t, int64(2), leaseGets, "one lease read per shard")

	require.Same(t, d, w.doc(ctx, following, t0.Add(2*time.Second)), "within streamEvery: the last read")
	require.Equal(t, 1, fs.callsOf("DescribeStream"))

	// The shard's lease taken, a checkpoint saved: owner and position.
	lc, err := lock.New(db, leases, lock.WithOwner("r1"))
	require.NoError(t, err)
	m := lc.NewMutex(follow.ShardMutex("g", "shard-1"))
	ok, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	t.Cleanup(func() { _ = m.Unlock(context.Background()) })
	require.NoError(t, m.Lease().SaveCheckpoint(ctx, "42"))
	d = w.doc(ctx, following, t0.Add(streamEvery))
	require.Equal(t, 2, fs.callsOf("DescribeStream"))
	require.Equal(t, "r1", d.Shards[0].Owner)
	require.Equal(t, "42", d.Shards[0].Position)
	require.Equal(t, 12.0, *d.Shards[0].LagSeconds)

	// Finished: no lag read; its lease is not read again.
	require.NoError(t, m.Lease().FinishAndRelease(ctx, "99"))
	iterators := fs.callsOf("GetShardIterator")
	d = w.doc(ctx, following, t0.Add(2*streamEvery))
	require.True(t, d.Shards[0].Finished)
	require.Empty(t, d.Shards[0].Owner)
	require.Equal(t, "99", d.Shards[0].Position)
	require.Nil(t, d.Shards[0].LagSeconds)
	require.Nil(t, d.LagSeconds, "no shard's lag is known")
	require.Equal(t, iterators+1, fs.callsOf("GetShardIterator"), "only shard-2's")
	before, _ := leaseReads.total()
	d = w.doc(ctx, following, t0.Add(3*streamEvery))
	after, _ := leaseReads.total()
	require.Equal(t, before+1, after, "shard-2's lease only")
	require.True(t, d.Shards[0].Finished)

	// A failed read keeps the last, with its error; the next good read clears it.
	fs.mu.Lock()
	fs.fail = errors.New("stream unavailable")
	fs.mu.Unlock()
	failed := w.doc(ctx, following, t0.Add(4*streamEvery))
	require.Contains(t, failed.Error, "stream unavailable")
	require.Len(t, failed.Shards, 2)
	require.Empty(t, d.Error, "the read before is not changed")
	fs.mu.Lock()
	fs.fail = nil
	fs.mu.Unlock()
	require.Empty(t, w.doc(ctx, following, t0.Add(5*streamEvery)).Error)
}
