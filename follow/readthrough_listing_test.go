package follow

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gappyStream is fakeStream with two behaviours of DynamoDB Streams: a DescribeStream answer
// that leaves out a shard that exists (hideOnce: its next answer; DynamoDB's listings may leave
// out the child of a shard that just closed), and empty pages before a shard's records
// (emptyFirst, for every iterator: "it might take multiple calls to get to a portion of the
// shard that contains stream records", says GetRecords' reference).
type gappyStream struct {
	*fakeStream
	mu         sync.Mutex
	hideOnce   map[string]bool
	emptyFirst map[string]int
}

func (x *gappyStream) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	out, err := x.fakeStream.DescribeStream(ctx, in, o...)
	if err != nil {
		return out, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	var kept []stypes.Shard
	for _, s := range out.StreamDescription.Shards {
		if x.hideOnce[*s.ShardId] {
			delete(x.hideOnce, *s.ShardId)
			continue
		}
		kept = append(kept, s)
	}
	out.StreamDescription.Shards = kept
	return out, nil
}

func (x *gappyStream) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	out, err := x.fakeStream.GetShardIterator(ctx, in, o...)
	x.mu.Lock()
	n := x.emptyFirst[aws.ToString(in.ShardId)]
	x.mu.Unlock()
	if err != nil || out.ShardIterator == nil || n == 0 {
		return out, err
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(fmt.Sprintf("empty%d|%s", n, *out.ShardIterator))}, nil
}

func (x *gappyStream) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	head, real, _ := strings.Cut(aws.ToString(in.ShardIterator), "|")
	n, err := strconv.Atoi(strings.TrimPrefix(head, "empty"))
	if !strings.HasPrefix(head, "empty") || err != nil {
		return x.fakeStream.GetRecords(ctx, in, o...)
	}
	next := real
	if n > 1 {
		next = fmt.Sprintf("empty%d|%s", n-1, real)
	}
	return &dynamodbstreams.GetRecordsOutput{NextShardIterator: aws.String(next)}, nil
}

// TestReadThroughGappyListing (found by a review of 1e48693): a child shard C (created 3h ago,
// a record from then, not yet read: no lease) that one DescribeStream answer left out. That
// look answered now (C not listed, so not bounding); the next bounded C by that look's time,
// the later of it and the creation C's id carries: both 3 hours after C's unread record. Now a
// listing with a closed shard and no child of it answers "cannot say", and a shard's bound is the
// creation its id carries when it has one.
func TestReadThroughGappyListing(t *testing.T) {
	ctx := context.Background()
	locks, clock, fs := throughSetup(t)
	now, id := clock.now, dynamoShardID
	at := func(shard string, t time.Time, keys ...string) {
		fs.mu.Lock()
		fs.created = t
		fs.mu.Unlock()
		fs.write(shard, keys...)
	}
	p := fs.addShard(id(now.Add(-5*time.Hour), 1), "")
	at(p, now.Add(-4*time.Hour), "a")
	fs.close(p)
	unread := now.Add(-3 * time.Hour)
	c := fs.addShard(id(unread, 2), p)
	at(c, unread, "b")
	m := locks.NewMutex(ShardMutex("g", p))
	ok, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, m.Lease().FinishAndRelease(ctx, fs.seqs(p)[0]))

	gs := &gappyStream{fakeStream: fs, hideOnce: map[string]bool{c: true}, emptyFirst: map[string]int{c: peekPages + 1}}
	r, err := NewReader(ReaderConfig{Streams: gs, StreamARN: fakeARN, Locks: locks, Group: "g", Clock: clock})
	require.NoError(t, err)
	through1, err := r.ReadThrough(ctx) // C left out of the listing
	require.NoError(t, err)
	clock.now = now.Add(29 * time.Minute)
	through2, err := r.ReadThrough(ctx) // C listed; its first pages are empty
	require.NoError(t, err)
	assert.Zero(t, through1, "C's parent closed and C not listed: cannot say")
	assert.Equal(t, unread, through2, "C listed, its record unread: bounded by C's creation")
}
