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
		requireOnceInOrder(t, append(first, second...), 35)
	})
}

// requireOnceInOrder checks that recs holds n distinct records and that the values each key was
// written with (v: 1, 2, 3 for k0..k9; 3 for k10..k14) arrive rising.
func requireOnceInOrder(t *testing.T, recs []stypes.Record, n int) {
	t.Helper()
	require.Len(t, recs, n)
	seen := map[string]bool{}
	lastV := map[string]int{}
	for _, r := range recs {
		seq := aws.ToString(r.Dynamodb.SequenceNumber)
		require.False(t, seen[seq], "record %s delivered twice", seq)
		seen[seq] = true
		img := r.Dynamodb.NewImage
		id := img["id"].(*stypes.AttributeValueMemberS).Value
		v, err := strconv.Atoi(img["v"].(*stypes.AttributeValueMemberN).Value)
		require.NoError(t, err)
		require.Greater(t, v, lastV[id], "key %s: v=%d after v=%d", id, v, lastV[id])
		lastV[id] = v
	}
}
