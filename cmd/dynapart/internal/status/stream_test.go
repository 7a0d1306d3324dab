package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// TestStatusShowsTheStream: a group whose worker followed its table's stream (work --follow) and
// stopped. Caught up, `status` (text and --json) shows the stream, its shard free at the
// sequence number of the shard's last record, lag 0 (the shard holds older records: the lag is
// read after the position), and the slot following the stream. With records written after that
// position and the shard's lease held by another reader, the shard shows that owner and a lag
// above 0. Finished, the shard has no lag.
func TestStatusShowsTheStream(t *testing.T) {
	f := newFollowedGroup(t)

	d := f.statusJSON(t)
	require.NotNil(t, d.Stream, "the group follows a stream: %+v", d)
	require.Equal(t, f.arn, d.Stream.ARN)
	s := f.shardOf(t, d)
	require.Equal(t, f.position, s.Position, "the shard's checkpoint: its last record")
	require.Empty(t, s.Owner, "the worker stopped: no reader holds the shard")
	require.False(t, s.Finished)
	require.NotNil(t, s.LagSeconds)
	require.Equal(t, 0.0, *s.LagSeconds, "caught up")
	require.Equal(t, 0.0, *d.Stream.LagSeconds)
	require.True(t, d.Slots[0].Following, "the slot's checkpoint says it follows the stream")
	require.Positive(t, d.Reads.StreamRequests, "the stream's reads are counted")
	text := f.c.MustRun("status", "--group", f.group, "--lease-table", f.leases)
	require.Contains(t, text, "pass 1 read, following the stream")
	require.Contains(t, text, "stream "+f.arn+": lag 0s (caught up), ")
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(f.shard)+`\s+\S+\s+free\s+false\s+`+f.position+`\s+0s$`, text)

	// Records after the position, the shard held by another reader.
	written := f.laterRecords(t)
	m := f.holdShard(t, "reader-x")
	d = f.statusJSON(t)
	s = f.shardOf(t, d)
	require.Equal(t, "reader-x", s.Owner)
	require.Equal(t, f.position, s.Position)
	require.NotNil(t, s.LagSeconds)
	require.Positive(t, *s.LagSeconds, "records after the position wait")
	require.LessOrEqual(t, *s.LagSeconds, time.Since(written).Seconds()+60, "the age of a record written since (DynamoDB Local rounds creation times down to the minute)")
	require.Equal(t, *s.LagSeconds, *d.Stream.LagSeconds)
	text = f.c.MustRun("status", "--group", f.group, "--lease-table", f.leases)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(f.shard)+`\s+\S+\s+reader-x\s+false\s+`+f.position+`\s+(<1s|\d+s|1m\d+s)$`, text)
	require.NotRegexp(t, `(?m)^`+regexp.QuoteMeta(f.shard)+`.*\s0s$`, text)

	// Finished: read to its end, nothing to wait for.
	require.NoError(t, m.Lease().FinishAndRelease(context.Background(), f.position))
	d = f.statusJSON(t)
	s = f.shardOf(t, d)
	require.True(t, s.Finished)
	require.Empty(t, s.Owner)
	require.Nil(t, s.LagSeconds, "a finished shard has no lag")
	require.Nil(t, d.Stream.LagSeconds, "no shard's lag is known")
	text = f.c.MustRun("status", "--group", f.group, "--lease-table", f.leases)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(f.shard)+`\s+\S+\s+free\s+true\s+`+f.position+`\s+-$`, text)
}

// followedGroup is a group whose worker followed its table's stream to the end of the stream's
// shard and stopped.
type followedGroup struct {
	c                    *clitest.CLI
	db                   *dynamodb.Client
	streams              *dynamodbstreams.Client
	table, leases, group string
	arn, shard, position string
	locks                *lock.Client
}

// newFollowedGroup makes a table of 5 items with its stream on, runs a worker that follows it
// (work --follow) while 3 items are written, until the shard's checkpoint is its last record,
// and stops it.
func newFollowedGroup(t *testing.T) *followedGroup {
	t.Helper()
	f, w, stop := startFollowedGroup(t)
	for i := range 3 {
		f.put(t, fmt.Sprintf("new-%d", i))
	}
	f.shard = f.onlyShard(t)
	require.Eventually(t, func() bool { // the worker reads on its own clock: no signal to wait on
		st := w.Stats().Follow
		return st != nil && st.Handled+st.Superseded >= 3 && f.checkpoint(t) == f.lastSequence(t) // by the stream, or by the pass
	}, time.Minute, 50*time.Millisecond, "the worker follows the stream to its last record")
	if err := stop(); err != nil {
		require.ErrorIs(t, err, context.Canceled, "stopped, not failed")
	}
	f.position = f.checkpoint(t)
	return f
}

func (f *followedGroup) put(t *testing.T, id string) {
	t.Helper()
	_, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table),
		Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}})
	require.NoError(t, err)
}

// onlyShard is the stream's one shard (DynamoDB Local's streams of small tables have one).
func (f *followedGroup) onlyShard(t *testing.T) string {
	t.Helper()
	out, err := f.streams.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(f.arn)})
	require.NoError(t, err)
	require.Len(t, out.StreamDescription.Shards, 1)
	return aws.ToString(out.StreamDescription.Shards[0].ShardId)
}

// lastSequence is the sequence number of the shard's last record, read from its start.
func (f *followedGroup) lastSequence(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	it, err := f.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(f.arn),
		ShardId: aws.String(f.shard), ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	require.NoError(t, err)
	last, iter := "", it.ShardIterator
	for iter != nil {
		out, err := f.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
		require.NoError(t, err)
		if len(out.Records) == 0 {
			return last
		}
		last, iter = aws.ToString(out.Records[len(out.Records)-1].Dynamodb.SequenceNumber), out.NextShardIterator
	}
	return last
}

// checkpoint is the shard's checkpoint on its lease.
func (f *followedGroup) checkpoint(t *testing.T) string {
	t.Helper()
	st, err := f.locks.MutexState(context.Background(), follow.ShardMutex(f.group, f.shard))
	require.NoError(t, err)
	return st.Checkpoint
}

// laterRecords writes 2 items and returns when.
func (f *followedGroup) laterRecords(t *testing.T) time.Time {
	t.Helper()
	written := time.Now()
	f.put(t, "later-0")
	f.put(t, "later-1")
	return written
}

// holdShard takes the shard's lease as owner, released at the end of the test.
func (f *followedGroup) holdShard(t *testing.T, owner string) *lock.Mutex {
	t.Helper()
	lc, err := lock.New(f.db, f.leases, lock.WithOwner(owner))
	require.NoError(t, err)
	m := lc.NewMutex(follow.ShardMutex(f.group, f.shard))
	ok, err := m.TryLock(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	t.Cleanup(func() { _ = m.Unlock(context.Background()) })
	return m
}

func (f *followedGroup) statusJSON(t *testing.T) status.Document {
	t.Helper()
	var d status.Document
	out := f.c.MustRun("status", "--group", f.group, "--lease-table", f.leases, "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	return d
}

// shardOf is the followed shard in d.
func (f *followedGroup) shardOf(t *testing.T, d status.Document) status.StreamShard {
	t.Helper()
	require.NotNil(t, d.Stream)
	for _, s := range d.Stream.Shards {
		if s.Shard == f.shard {
			return s
		}
	}
	t.Fatalf("shard %s not in %+v", f.shard, d.Stream.Shards)
	return status.StreamShard{}
}

// startFollowedGroup makes a table of 5 items with its stream on and starts a worker that follows
// it (work --follow); stop stops the worker and returns Run's error (also when the test ends).
func startFollowedGroup(t *testing.T) (f *followedGroup, w *worker.Worker, stop func() error) {
	t.Helper()
	f = &followedGroup{c: clitest.New(t), db: ddbtest.Client(t), streams: ddbtest.Streams(t)}
	f.table, f.leases = f.c.SeededTables(t, 5)
	f.c.MustRun("init", "--table", f.table, "--key", "id:S", "--lease-table", f.leases, "--stream")
	f.group = f.table + "/default"
	var err error
	f.arn, _, err = follow.EnableStream(context.Background(), f.db, f.table)
	require.NoError(t, err)
	f.locks, err = lock.New(f.db, f.leases)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	w, err = worker.New(worker.Config{Client: f.db, Streams: f.streams, Table: f.table, LeaseTable: f.leases, Workers: 1,
		Owner: "follower", Follow: true, StreamPoll: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func(context.Context, worker.Item) error { return nil }) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() }) // also when the test fails before it stops the worker
	return f, w, stop
}
