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

// warnEmptyIndex warns an index-mode worker whose pending index holds nothing while the table has
// items (DescribeTable's counts, updated by AWS about every six hours): only items that carry the
// shard attribute are in the index, and nothing dynapart's CLI writes sets it, so a worker over
// a table whose writers do not mark items processes nothing, and a --once one exits 0.
func warnEmptyIndex(ctx context.Context, log *slog.Logger, db *dynamodb.Client, cfg worker.Config) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := cli.Describe(cctx, db, cfg.Table)
	if err != nil || t == nil || aws.ToInt64(t.ItemCount) == 0 {
		return
	}
	if n, ok := indexItems(t, cfg.IndexName); ok && n == 0 {
		log.Warn("dynapart: index mode reads only the pending index, which DescribeTable says is empty while the table has items: "+
			"an item is in it once its writer sets the shard attribute to the item's shard (scan.MarkPending in Go; "+
			"'dynapart partition --workers SHARDS KEY' prints it); use --mode segment to process the items there are",
			"index", cfg.IndexName, "shard_attr", cfg.ShardAttr, "table_items", aws.ToInt64(t.ItemCount))
	}
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
