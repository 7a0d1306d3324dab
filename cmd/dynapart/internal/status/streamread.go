package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"golang.org/x/sync/errgroup"

	"github.com/dynapart/dynapart/follow"
)

// One read of the stream: DescribeTable for its ARN (once a minute), DescribeStream (each of its
// pages) for the shards, then for each shard not known to be finished one GetItem of its lease
// (half a read unit) and, unless the lease says finished, GetShardIterator right after its
// position (at the start without one) and one GetRecords of one record, whose age is the shard's
// lag. Finished shards stay finished: their leases are read once. Nothing is written.

const (
	// arnEvery is how often the table is described again for its stream's ARN (a stream turned
	// off and on again has a new one).
	arnEvery = time.Minute
	// shardReadsAtOnce bounds the shards read at the same time.
	shardReadsAtOnce = 8
	// streamReadTimeout bounds one read of the stream.
	streamReadTimeout = 10 * time.Second
)

// errTrimmedLag is a shard's error when the stream no longer holds the records after its position.
var errTrimmedLag = errors.New("the stream no longer holds the records after its position (older than its retention): its reader scans the share again")

// read reads the stream of table at now.
func (w *streamWatch) read(ctx context.Context, table string, now time.Time) (*streamDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, streamReadTimeout)
	defer cancel()
	arn, err := w.streamARN(ctx, table, now)
	if err != nil {
		return nil, err
	}
	shards, err := w.listShards(ctx, arn)
	if err != nil {
		return nil, err
	}
	var g errgroup.Group
	g.SetLimit(shardReadsAtOnce)
	for i := range shards {
		if f, ok := w.finished[shards[i].Shard]; ok {
			shards[i] = f
			continue
		}
		g.Go(func() error {
			w.readShard(ctx, arn, &shards[i], now)
			return nil
		})
	}
	_ = g.Wait() // a shard's failure is its Error
	w.finished = map[string]shardDoc{}
	for _, s := range shards {
		if s.Finished {
			w.finished[s.Shard] = s
		}
	}
	return &streamDoc{ARN: arn, LagSeconds: streamLag(shards), Shards: shards, ReadAt: now.UTC()}, nil
}

// streamARN is the table's stream, described again after arnEvery.
func (w *streamWatch) streamARN(ctx context.Context, table string, now time.Time) (string, error) {
	if w.arn != "" && w.table == table && now.Sub(w.arnAt) < arnEvery {
		return w.arn, nil
	}
	out, err := w.tables.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", fmt.Errorf("describe table %q for its stream: %w", table, err)
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	if spec := out.Table.StreamSpecification; spec == nil || !aws.ToBool(spec.StreamEnabled) || arn == "" {
		return "", fmt.Errorf("table %q has no stream turned on (dynapart init --table %s --stream): its followers cannot read one", table, table)
	}
	if arn != w.arn {
		w.finished = map[string]shardDoc{}
	}
	w.arn, w.table, w.arnAt = arn, table, now
	return arn, nil
}

// listShards lists the stream's shards (every page of DescribeStream), by shard id.
func (w *streamWatch) listShards(ctx context.Context, arn string) ([]shardDoc, error) {
	shards := []shardDoc{}
	var start *string
	for {
		out, err := w.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			return nil, fmt.Errorf("describe stream %s: %w", arn, err)
		}
		d := out.StreamDescription
		if d == nil {
			return nil, fmt.Errorf("describe stream %s: no description in the answer", arn)
		}
		for _, s := range d.Shards {
			shards = append(shards, shardDoc{Shard: aws.ToString(s.ShardId), Parent: aws.ToString(s.ParentShardId)})
		}
		if d.LastEvaluatedShardId == nil {
			break
		}
		start = d.LastEvaluatedShardId
	}
	slices.SortFunc(shards, func(a, b shardDoc) int { return strings.Compare(a.Shard, b.Shard) })
	return shards, nil
}

// readShard fills s from its lease (owner, position, finished) and, unless finished, its lag.
func (w *streamWatch) readShard(ctx context.Context, arn string, s *shardDoc, now time.Time) {
	st, err := w.locks.MutexState(ctx, follow.ShardMutex(w.group, s.Shard))
	if err != nil {
		s.Error = "reading its lease: " + err.Error()
		return
	}
	if st.Held {
		s.Owner = st.Owner
	}
	s.Finished, s.Position = st.Finished, st.Checkpoint
	if s.Finished {
		return
	}
	lag, err := w.shardLag(ctx, arn, s.Shard, s.Position, now)
	if err != nil {
		s.Error = err.Error()
		return
	}
	s.LagSeconds = &lag
}

// shardLag is the age at now of the shard's first record after position (from its start when
// position is ""), 0 when there is none.
func (w *streamWatch) shardLag(ctx context.Context, arn, shard, position string, now time.Time) (float64, error) {
	t, err := follow.OldestUnread(ctx, w.streams, arn, shard, position, 1) // the page read every streamEvery: one
	switch {
	case errors.Is(err, follow.ErrTrimmed):
		return 0, errTrimmedLag
	case err != nil:
		return 0, err
	case t.IsZero():
		return 0, nil
	}
	return max(0, now.Sub(t).Seconds()), nil
}
