package chaos

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/dynapart/dynapart/follow"
)

// completionRec is one write that moved an item to done, as the ledger's stream shows it: the
// version it recorded and the claim's worker and lease.
type completionRec struct {
	version string
	owner   string
	lease   [2]int64
}

// ledgerStream says where the follow scenario reads the completions from: the stream of the table
// that holds the ledger's rows (the source table itself for the inline ledger, whose attributes
// carry prefix; the ledger table for the table ledger, whose rows hold the item's key as a map
// under "key").
type ledgerStream struct {
	arn    string
	prefix string
	table  bool
}

// keyOf is the item key a ledger row's image belongs to, as keyString renders it.
func (ls ledgerStream) keyOf(img map[string]types.AttributeValue) string {
	if !ls.table {
		return keyString(map[string]types.AttributeValue{"id": img["id"]})
	}
	m, _ := img["key"].(*types.AttributeValueMemberM)
	if m == nil {
		return ""
	}
	return keyString(map[string]types.AttributeValue{"id": m.Value["id"]})
}

// completions reads the whole stream, every shard from its oldest record, parents before children
// (an item's records are in one lineage, in order), and returns each item's completions in order
// and the number of records read. DynamoDB keeps a stream's records for 24 hours: the run's are
// all there.
func (ls ledgerStream) completions(ctx context.Context, sc *dynamodbstreams.Client) (map[string][]completionRec, int, error) {
	shards, err := streamShards(ctx, sc, ls.arn)
	if err != nil {
		return nil, 0, err
	}
	out := map[string][]completionRec{}
	n := 0
	for _, id := range shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(ls.arn), ShardId: aws.String(id),
			ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return nil, n, fmt.Errorf("chaos: shard %s: %w", id, err)
		}
		iter, empty := it.ShardIterator, 0
		for iter != nil && empty < 3 { // an open shard at its end answers empty pages
			page, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return nil, n, fmt.Errorf("chaos: shard %s: %w", id, err)
			}
			if len(page.Records) == 0 {
				empty++
			} else {
				empty = 0
			}
			for _, rec := range page.Records {
				n++
				if rec.Dynamodb == nil {
					continue
				}
				cur, old := follow.Image(rec.Dynamodb.NewImage), follow.Image(rec.Dynamodb.OldImage)
				p := ls.prefix
				if sAttr(cur, p+"status") != "done" || sAttr(old, p+"status") == "done" {
					continue
				}
				k := ls.keyOf(cur)
				out[k] = append(out[k], completionRec{version: sAttr(cur, p+"version"), owner: sAttr(cur, p+"owner"),
					lease: [2]int64{nAttr(cur, p+"slot"), nAttr(cur, p+"token")}})
			}
			iter = page.NextShardIterator
		}
	}
	return out, n, nil
}

// streamShards lists a stream's shards, each after its parent.
func streamShards(ctx context.Context, sc *dynamodbstreams.Client, arn string) ([]string, error) {
	parent := map[string]string{}
	var ids []string
	var start *string
	for {
		d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			return nil, fmt.Errorf("chaos: describe stream: %w", err)
		}
		for _, sh := range d.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			parent[id] = aws.ToString(sh.ParentShardId)
			ids = append(ids, id)
		}
		if start = d.StreamDescription.LastEvaluatedShardId; start == nil {
			break
		}
	}
	var out []string
	placed := map[string]bool{}
	var place func(id string)
	place = func(id string) {
		if placed[id] {
			return
		}
		placed[id] = true
		if p, ok := parent[id]; ok && p != "" {
			place(p)
		}
		if _, ok := parent[id]; ok {
			out = append(out, id)
		}
	}
	for _, id := range ids {
		place(id)
	}
	return out, nil
}
