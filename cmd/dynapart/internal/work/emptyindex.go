package work

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// warnEmptyIndex warns an index-mode worker whose pending index holds nothing while the table
// has items (DescribeTable's counts, updated by AWS about every six hours) of which a sample holds
// some that are neither in the index nor finished: only items that carry the shard attribute are
// in the index, and nothing dynapart's CLI writes sets it, so a worker over a table whose writers
// do not mark items processes nothing, and a --once one exits 0. A drained queue (every item
// finished, out of the index) is index mode's idle state and says nothing. With the table ledger
// an item does not show its state, and nothing is said either.
func warnEmptyIndex(ctx context.Context, log *slog.Logger, db *dynamodb.Client, cfg worker.Config) {
	if cfg.Ledger != worker.LedgerInline {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := cli.Describe(cctx, db, cfg.Table)
	if err != nil || t == nil || aws.ToInt64(t.ItemCount) == 0 {
		return
	}
	if n, ok := indexItems(t, cfg.IndexName); !ok || n > 0 || !unmarkedSampled(cctx, db, cfg) {
		return
	}
	log.Warn("dynapart: index mode reads only the pending index, which DescribeTable says is empty while the table has unfinished items: "+
		"an item is in it once its writer sets the shard attribute to the item's shard (scan.MarkPending in Go; "+
		"'dynapart partition --workers SHARDS KEY' prints it); use --mode segment to process the items there are",
		"index", cfg.IndexName, "shard_attr", cfg.ShardAttr, "table_items", aws.ToInt64(t.ItemCount))
}

// unmarkedSampled reports whether a page of up to 25 items of the table holds one with neither
// the shard attribute nor a status (inline ledger): unfinished, and not in the pending index.
func unmarkedSampled(ctx context.Context, db *dynamodb.Client, cfg worker.Config) bool {
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(cfg.Table), Limit: aws.Int32(25),
		ProjectionExpression:     aws.String("#shard, #status"),
		ExpressionAttributeNames: map[string]string{"#shard": cfg.ShardAttr, "#status": cfg.AttrPrefix + "status"}})
	if err != nil {
		return false
	}
	for _, it := range out.Items {
		if len(it) == 0 {
			return true
		}
	}
	return false
}

// indexItems is the item count of the global secondary index name of t.
func indexItems(t *types.TableDescription, name string) (int64, bool) {
	for _, g := range t.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == name {
			return aws.ToInt64(g.ItemCount), true
		}
	}
	return 0, false
}
