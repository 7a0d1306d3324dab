package follow

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Shards and their lineage. DynamoDB splits a stream's shards as the table's partitions split and
// rolls them over every few hours: a closed shard has one or more children, which hold the writes
// that came after its last record. The writes of one item key are in one shard at a time, so
// reading a child only once its parent is finished keeps every key's records in write order.

// shard is one shard of the stream as DescribeStream lists it.
type shard struct {
	id, parent string
	closed     bool // DynamoDB gave it an ending sequence number: it takes no more records
}

// readable reports whether sh may be read now: it has no parent, or its parent is finished, or
// its parent is no longer listed (trimmed away with its records: nothing is left to wait for;
// whether the group lost records with it is run.parentGone's question).
func (sh shard) readable(listed map[string]bool, finished func(id string) bool) bool {
	return sh.parent == "" || !listed[sh.parent] || finished(sh.parent)
}

// listShards lists every shard of the stream, following DescribeStream's pages
// (ExclusiveStartShardId = the previous page's LastEvaluatedShardId), in lineage order. A stream
// that is no longer enabled, or no longer exists, is a *TrimmedError: the table's writes from then
// on are in no stream this reader reads.
func listShards(ctx context.Context, sc StreamsClient, arn string) ([]shard, error) {
	var shards []shard
	var start *string
	for {
		out, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{
			StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if isNotFound(err) {
			return nil, &TrimmedError{Reason: fmt.Sprintf("stream %s does not exist", arn), Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("follow: describe stream %s: %w", arn, err)
		}
		d := out.StreamDescription
		if d == nil {
			return nil, fmt.Errorf("follow: describe stream %s: no description in the answer", arn)
		}
		if d.StreamStatus == stypes.StreamStatusDisabled || d.StreamStatus == stypes.StreamStatusDisabling {
			return nil, &TrimmedError{Reason: fmt.Sprintf("stream %s is %s", arn, d.StreamStatus)}
		}
		for _, s := range d.Shards {
			closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
			shards = append(shards, shard{id: aws.ToString(s.ShardId), parent: aws.ToString(s.ParentShardId), closed: closed})
		}
		if d.LastEvaluatedShardId == nil {
			return lineage(shards), nil
		}
		start = d.LastEvaluatedShardId
	}
}

// lineage orders shards so that every parent comes before its children: by depth (the number of
// listed ancestors), then by shard id, which DynamoDB makes from the shard's creation time.
func lineage(shards []shard) []shard {
	parent := make(map[string]string, len(shards))
	for _, s := range shards {
		parent[s.id] = s.parent
	}
	depth := func(id string) int {
		d := 0
		for p := parent[id]; p != "" && d < len(shards); p = parent[p] { // d < len: a cycle ends too
			if _, listed := parent[p]; !listed {
				break
			}
			d++
		}
		return d
	}
	out := slices.Clone(shards)
	depths := make(map[string]int, len(out))
	for _, s := range out {
		depths[s.id] = depth(s.id)
	}
	slices.SortStableFunc(out, func(a, b shard) int {
		return cmp.Or(cmp.Compare(depths[a.id], depths[b.id]), cmp.Compare(a.id, b.id))
	})
	return out
}

// childless is a closed shard of shards that no other lists as its parent, or "": DynamoDB
// makes a closed shard's child when it closes, so such a listing left out a shard that exists
// (DynamoDB's listings may, for a while, after a shard closes).
func childless(shards []shard) string {
	parents := map[string]bool{}
	for _, s := range shards {
		parents[s.parent] = true
	}
	for _, s := range shards {
		if s.closed && !parents[s.id] {
			return s.id
		}
	}
	return ""
}
