package follow

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

// The tests against real backends run on DynamoDB Local and on moto. moto is flagged as lacking
// ddbtest.CapStreams (after a stream is turned off, its DescribeStream answers HTTP 500), but what
// the reader needs of a live stream it has: one shard, never closed, DescribeStream,
// GetShardIterator (TRIM_HORIZON, AFTER_SEQUENCE_NUMBER) and GetRecords.

// streamTable creates a table with its stream on and returns the stream's ARN.
func streamTable(t *testing.T) (*dynamodb.Client, string, string) {
	t.Helper()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	arn, _, err := EnableStream(context.Background(), db, table)
	require.NoError(t, err)
	return db, table, arn
}

func put(t *testing.T, db *dynamodb.Client, table, id string, v int) {
	t.Helper()
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: id}, "v": &types.AttributeValueMemberN{Value: strconv.Itoa(v)}}})
	require.NoError(t, err)
}

// collect receives batches until n records have come, and returns them in arrival order with the
// last sequence number of each shard.
func collect(t *testing.T, rr *running, n int) ([]stypes.Record, map[string]string) {
	t.Helper()
	var recs []stypes.Record
	last := map[string]string{}
	for len(recs) < n {
		b := rr.nextBatch(t)
		recs = append(recs, b.Records...)
		last[b.Shard] = b.last()
	}
	return recs, last
}

// seqAfter compares sequence numbers (decimal strings of one width per stream).
func seqAfter(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// TestReaderDeliversOnceInOrder: every record of the table's writes is delivered once, the writes
// of each key in order; each Done batch is checkpointed, and a second reader started after the
// first stopped resumes after the checkpoint: no Done record comes again.
func TestReaderDeliversOnceInOrder(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		db, table, arn := streamTable(t)
		ldb, ltable := lockTable(t)
		for i := range 10 {
			put(t, db, table, fmt.Sprint("k", i), 1)
			put(t, db, table, fmt.Sprint("k", i), 2)
		}
		cfg := ReaderConfig{Streams: ddbtest.Streams(t), StreamARN: arn, Locks: newLocks(t, ldb, ltable, "a"),
			Group: "g", PollInterval: 20 * time.Millisecond}
		a := startReader(t, cfg, true)
		first, last := collect(t, a, 20)
		for shard, seq := range last {
			a.waitSaved(t, shard, seq)
		}
		require.ErrorIs(t, a.halt(t), context.Canceled)
		for shard, seq := range last {
			st := mutexState(t, cfg.Locks, "g", shard)
			require.False(t, st.Held, "released")
			require.Equal(t, seq, st.Checkpoint)
		}

		for i := range 15 {
			put(t, db, table, fmt.Sprint("k", i), 3)
		}
		cfg.Locks = newLocks(t, ldb, ltable, "b")
		b := startReader(t, cfg, true)
		second, last := collect(t, b, 15)
		for shard, seq := range last {
			b.waitSaved(t, shard, seq)
		}
		b.waitLooks(t, 2)
		b.noBatch(t)
		requireOnceInOrder(t, append(first, second...), streamSeqs(t, arn), 35)
	})
}

// streamSeqs reads every record the stream holds, shard by shard from its oldest, and returns
// their sequence numbers in the stream's order. It is what a reader must deliver: a backend may
// hold more records than the test's writes (moto records a put that changes nothing, as a put the
// SDK sent again after a lost answer is).
func streamSeqs(t *testing.T, arn string) []string {
	t.Helper()
	ctx := context.Background()
	sc := ddbtest.Streams(t)
	var seqs []string
	var after *string
	for {
		out, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: after})
		require.NoError(t, err)
		for _, sh := range out.StreamDescription.Shards {
			it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
				ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
			require.NoError(t, err)
			for iter := it.ShardIterator; iter != nil; {
				page, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
				require.NoError(t, err)
				for _, r := range page.Records {
					seqs = append(seqs, aws.ToString(r.Dynamodb.SequenceNumber))
				}
				if len(page.Records) == 0 {
					break // an open shard's end (the backends here put no empty pages before records)
				}
				iter = page.NextShardIterator
			}
		}
		if after = out.StreamDescription.LastEvaluatedShardId; after == nil {
			return seqs
		}
	}
}

// requireOnceInOrder checks that recs are the stream's records (want, from streamSeqs), each once,
// that the stream holds at least the test's writes, and that the values each key was written with
// (v: 1, 2, 3 for k0..k9; 3 for k10..k14) arrive in the stream's order: rising, or equal for a
// record of a put that changed nothing.
func requireOnceInOrder(t *testing.T, recs []stypes.Record, want []string, writes int) {
	t.Helper()
	require.GreaterOrEqual(t, len(want), writes, "the stream holds every write")
	pos := map[string]int{}
	for i, seq := range want {
		pos[seq] = i
	}
	seen := map[string]bool{}
	lastPos, lastV := map[string]int{}, map[string]int{}
	for _, r := range recs {
		seq := aws.ToString(r.Dynamodb.SequenceNumber)
		require.False(t, seen[seq], "record %s delivered twice", seq)
		seen[seq] = true
		p, ok := pos[seq]
		require.True(t, ok, "record %s delivered, not in the stream", seq)
		img := r.Dynamodb.NewImage
		id := img["id"].(*stypes.AttributeValueMemberS).Value
		v, err := strconv.Atoi(img["v"].(*stypes.AttributeValueMemberN).Value)
		require.NoError(t, err)
		if last, ok := lastPos[id]; ok {
			require.Greater(t, p, last, "key %s: record %s delivered after a later one", id, seq)
		}
		require.GreaterOrEqual(t, v, lastV[id], "key %s: v=%d after v=%d", id, v, lastV[id])
		lastPos[id], lastV[id] = p, v
	}
	require.Len(t, recs, len(want), "every record of the stream delivered")
}
