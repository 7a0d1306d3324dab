package follow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// skipped (and remembered, at no further cost).
//
// A shard whose pages run out before a record (see OldestUnread) is not taken as read to its end:
// DynamoDB may answer empty pages although records lie further on. It is read at least as far as
// its checkpoint's own record, and holds no record created before the shard (the time its id
// carries, see shardCreated; for an id without one, the Reader's last look that did not list
// it); the later of the two is its bound. A shard with neither makes ReadThrough answer the zero
// time: it cannot say, and the caller keeps what it knew. So does a listing that leaves out the
// child of a closed shard (DynamoDB's may, for a while). On a stream whose shards close every
// few hours, as DynamoDB's do, an idle shard holds the answer back until it closes; on one whose
// shards never close (DynamoDB Local), until a record comes.
//
// The cost: DescribeStream, and for each other shard one GetItem of its lease, GetShardIterator
// and GetRecords of one record (more while the pages come back empty, and one more of each for a
// shard whose pages ran out). Nothing is written. A shard whose records after its checkpoint the
// stream no longer holds is a *TrimmedError. Safe to call while Run runs.
func (r *Reader) ReadThrough(ctx context.Context) (time.Time, error) {
	now := r.cfg.Clock.Now() // before the listing: a record created after it is not claimed read
	shards, err := listShards(ctx, r.cfg.Streams, r.cfg.StreamARN)
	if err != nil {
		return time.Time{}, err
	}
	if orphan := childless(shards); orphan != "" {
		r.log.Debug("follow: the stream's listing leaves out the child of a closed shard; how far the group has read is unknown until it lists it", "shard", orphan)
		return time.Time{}, nil // unknown: records of the missing child may be unread
	}
	listedAfter := r.noteListing(now, shards)
	var mu sync.Mutex
	through := now
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readsAtOnce)
	for _, s := range shards {
		if r.throughFinished(s.id) {
			continue
		}
		g.Go(func() error {
			t, bounds, err := r.shardThrough(gctx, s.id, listedAfter[s.id])
			if err == nil && bounds {
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

// shardThrough is how far the group has read the shard: every record it holds created before the
// time is read (the zero time: unknown). bounds is false for a shard read to its end, or whose
// lease says finished. listedAfter is the time of the Reader's last look that did not list the
// shard (zero when unknown).
func (r *Reader) shardThrough(ctx context.Context, id string, listedAfter time.Time) (t time.Time, bounds bool, err error) {
	st, err := r.cfg.Locks.MutexState(ctx, ShardMutex(r.cfg.Group, id))
	switch {
	case err != nil:
		return time.Time{}, false, fmt.Errorf("follow: read the lease of shard %s: %w", id, err)
	case st.Finished:
		r.throughMu.Lock()
		r.throughDone[id] = true
		r.throughMu.Unlock()
		return time.Time{}, false, nil
	}
	p, err := peek(ctx, r.cfg.Streams, iteratorAfter(r.cfg.StreamARN, id, st.Checkpoint), peekPages)
	switch {
	case err != nil:
		return time.Time{}, false, err
	case p.ended:
		return time.Time{}, false, nil
	case !p.oldest.IsZero():
		return p.oldest, true, nil
	}
	// The pages ran out: the shard holds no record from before it was created (or listed), and
	// is read at least as far as the checkpoint's record.
	floor := shardCreated(id, r.cfg.Clock.Now()) // the server's own record of it, or else
	if floor.IsZero() {
		floor = listedAfter
	}
	if st.Checkpoint == "" {
		return floor, true, nil
	}
	at, err := peek(ctx, r.cfg.Streams, iteratorAt(r.cfg.StreamARN, id, st.Checkpoint), peekPages)
	if err != nil && !errors.Is(err, ErrTrimmed) {
		return time.Time{}, false, err
	}
	return maxTime(at.oldest, floor), true, nil // trimmed: older than the retention, unknown
}

// shardCreated is the creation time DynamoDB writes into a shard's id
// (shardId-<milliseconds since the epoch, 20 digits>-<hex>, on DynamoDB and DynamoDB Local alike,
// which is also why ids sort by age); zero for an id not of that form, or whose time is
// implausible (before 2012, or more than an hour after now).
func shardCreated(id string, now time.Time) time.Time {
	rest, ok := strings.CutPrefix(id, "shardId-")
	digits, _, found := strings.Cut(rest, "-")
	if !ok || !found || len(digits) != 20 {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(digits, 10, 64)
	t := time.UnixMilli(ms)
	if err != nil || t.Year() < 2012 || t.After(now.Add(time.Hour)) {
		return time.Time{}
	}
	return t
}

// noteListing records the shards a look listed, and returns for each the time of the Reader's
// last look that did not list it (zero for shards its first look listed): a shard holds no record
// created before it existed. It forgets the shards the stream no longer lists.
func (r *Reader) noteListing(now time.Time, shards []shard) map[string]time.Time {
	r.throughMu.Lock()
	defer r.throughMu.Unlock()
	listed := make(map[string]time.Time, len(shards))
	done := map[string]bool{}
	for _, s := range shards {
		after, seen := r.listedAfter[s.id]
		if !seen {
			after = r.lastListing
		}
		listed[s.id] = after
		if r.throughDone[s.id] {
			done[s.id] = true
		}
	}
	r.listedAfter, r.throughDone, r.lastListing = listed, done, now
	return listed // never written again: the next look makes a new map
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
	p, err := peek(ctx, sc, iteratorAfter(arn, shard, position), pages)
	return p.oldest, err
}

// peeked is what peek found: the creation time of the first record, or that the shard ended
// before one (closed, with nothing after the iterator's start); neither when the pages ran out.
type peeked struct {
	oldest time.Time
	ended  bool
}

// peek reads one record from the iterator in asks for, following up to pages empty pages.
func peek(ctx context.Context, sc StreamsClient, in *dynamodbstreams.GetShardIteratorInput, pages int) (peeked, error) {
	shard, position := aws.ToString(in.ShardId), aws.ToString(in.SequenceNumber)
	lost := func(err error) error {
		return &TrimmedError{Shard: shard, Checkpoint: position, Err: err,
			Reason: "the stream no longer holds the records after the checkpoint"}
	}
	it, err := sc.GetShardIterator(ctx, in)
	switch {
	case err != nil && (isTrimmed(err) || position != "" && isNotFound(err)):
		return peeked{}, lost(err)
	case err != nil:
		return peeked{}, fmt.Errorf("follow: shard iterator of %s: %w", shard, err)
	case it.ShardIterator == nil:
		return peeked{ended: true}, nil // a closed shard with nothing after position
	}
	iter := it.ShardIterator
	for range max(pages, 1) {
		out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1)})
		switch {
		case err != nil && isTrimmed(err):
			return peeked{}, lost(err)
		case err != nil:
			return peeked{}, fmt.Errorf("follow: read shard %s: %w", shard, err)
		case len(out.Records) > 0:
			if t := newBatch(shard, out.Records).oldest(); !t.IsZero() {
				return peeked{oldest: t}, nil
			}
			return peeked{}, fmt.Errorf("follow: shard %s: the stream's record has no ApproximateCreationDateTime", shard)
		case out.NextShardIterator == nil:
			return peeked{ended: true}, nil // closed, and nothing after position
		}
		iter = out.NextShardIterator // an empty page: records may lie further on
	}
	return peeked{}, nil
}

// peekPages bounds the pages ReadThrough reads of a shard (OldestUnread) before it takes the
// shard as read as far as its checkpoint's record.
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

// iteratorAt asks for an iterator at the record whose sequence number is position.
func iteratorAt(arn, shard, position string) *dynamodbstreams.GetShardIteratorInput {
	in := iteratorAfter(arn, shard, position)
	in.ShardIteratorType = stypes.ShardIteratorTypeAtSequenceNumber
	return in
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
