package follow

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"golang.org/x/sync/errgroup"
)

// How far the group has read the stream. A record is read once its batch is Done and the
// shard's checkpoint moved past it. The group's oldest unread record, over every shard the stream
// lists, tells how far behind the group is: every record created before it is read, or was in a
// shard the stream dropped (which a caller that judged the group's progress before must know
// was read: see ReadThrough). A caller that saves this time, and rescans when it grows older
// than the stream's retention, detects every loss, however many generations of shards closed and
// went since, which a checkpoint or a parent's lease cannot show alone.

// readsAtOnce bounds the shards ReadThrough reads at the same time.
const readsAtOnce = 8

// ReadThrough is how far the Reader's group has read the stream: the creation time
// (ApproximateCreationDateTime, which DynamoDB rounds down) of the oldest record, over every shard
// the stream lists, that is after its shard's checkpoint (a shard without one from its oldest
// record), or now, on the Reader's clock, when there is none. Shards whose leases say finished are
// skipped (and remembered, at no further cost). The cost: DescribeStream, and for each other
// shard one GetItem of its lease, GetShardIterator and GetRecords of one record (more while
// the pages come back empty, see OldestUnread). Nothing is
// written. A shard whose records after its checkpoint the stream no longer holds is a
// *TrimmedError. Safe to call while Run runs.
func (r *Reader) ReadThrough(ctx context.Context) (time.Time, error) {
	now := r.cfg.Clock.Now() // before the listing: a record created after it is not claimed read
	shards, err := listShards(ctx, r.cfg.Streams, r.cfg.StreamARN)
	if err != nil {
		return time.Time{}, err
	}
	var mu sync.Mutex
	through := now
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readsAtOnce)
	for _, s := range shards {
		if r.throughFinished(s.id) {
			continue
		}
		g.Go(func() error {
			t, err := r.shardUnread(gctx, s.id)
			if err == nil && !t.IsZero() {
				mu.Lock()
				through = minTime(through, t)
				mu.Unlock()
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return time.Time{}, err
	}
	return through, nil
}

// shardUnread is the creation time of the shard's oldest unread record; zero when it has none,
// or its lease says finished.
func (r *Reader) shardUnread(ctx context.Context, id string) (time.Time, error) {
	st, err := r.cfg.Locks.MutexState(ctx, ShardMutex(r.cfg.Group, id))
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("follow: read the lease of shard %s: %w", id, err)
	case st.Finished:
		r.throughMu.Lock()
		r.throughDone[id] = true
		r.throughMu.Unlock()
		return time.Time{}, nil
	}
	return OldestUnread(ctx, r.cfg.Streams, r.cfg.StreamARN, id, st.Checkpoint, peekPages)
}

func (r *Reader) throughFinished(id string) bool {
	r.throughMu.Lock()
	defer r.throughMu.Unlock()
	return r.throughDone[id]
}

// OldestUnread is the creation time (ApproximateCreationDateTime) of the shard's first record
// after position (a sequence number; "" for the shard's oldest record); zero when there is none
// yet (the shard's pages, followed for up to pages of them, hold no record: DynamoDB may answer
// a page with no records although records lie further on, and a shard read to its end answers so
// for ever). A *TrimmedError when the stream no longer holds the records after position, or the shard
// is gone with them.
func OldestUnread(ctx context.Context, sc StreamsClient, arn, shard, position string, pages int) (time.Time, error) {
	lost := func(err error) error {
		return &TrimmedError{Shard: shard, Checkpoint: position, Err: err,
			Reason: "the stream no longer holds the records after the checkpoint"}
	}
	it, err := sc.GetShardIterator(ctx, iteratorAfter(arn, shard, position))
	switch {
	case err != nil && (isTrimmed(err) || position != "" && isNotFound(err)):
		return time.Time{}, lost(err)
	case err != nil:
		return time.Time{}, fmt.Errorf("follow: shard iterator of %s: %w", shard, err)
	case it.ShardIterator == nil:
		return time.Time{}, nil // a closed shard with nothing after position
	}
	iter := it.ShardIterator
	for range max(pages, 1) {
		out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1)})
		switch {
		case err != nil && isTrimmed(err):
			return time.Time{}, lost(err)
		case err != nil:
			return time.Time{}, fmt.Errorf("follow: read shard %s: %w", shard, err)
		case len(out.Records) > 0:
			if t := newBatch(shard, out.Records).oldest(); !t.IsZero() {
				return t, nil
			}
			return time.Time{}, fmt.Errorf("follow: shard %s: the stream's record has no ApproximateCreationDateTime", shard)
		case out.NextShardIterator == nil:
			return time.Time{}, nil // closed, and nothing after position
		}
		iter = out.NextShardIterator // an empty page: records may lie further on
	}
	return time.Time{}, nil
}

// peekPages bounds the pages ReadThrough reads of a shard (OldestUnread): one still without a
// record after them is taken as read to its end.
const peekPages = 8

// iteratorAfter asks for an iterator right after position (a sequence number), or at the shard's
// oldest record when position is "".
func iteratorAfter(arn, shard, position string) *dynamodbstreams.GetShardIteratorInput {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard),
		ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon}
	if position != "" {
		in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeAfterSequenceNumber, aws.String(position)
	}
	return in
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
