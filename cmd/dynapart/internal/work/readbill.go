package work

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/scan"
)

// readBill is what one pass of a continuous worker in segment or filter mode reads: the whole
// share again, every pass, whether or not anything is pending.
type readBill struct {
	TableBytes   int64
	Consistent   bool
	Mode         scan.Mode
	Workers      int
	PollInterval time.Duration
}

// tableRCU is the RCU of one full scan of the table: its size in 4 KB units, halved for an
// eventually consistent scan (DynamoDB rounds each page, not each item, up to 4 KB).
func (b readBill) tableRCU() float64 {
	units := math.Ceil(float64(b.TableBytes) / 4096)
	if !b.Consistent {
		return units / 2
	}
	return units
}

// workerRCU is what this worker reads per pass: its 1/N in segment mode, the whole table in
// filter mode (every worker scans everything and keeps its share).
func (b readBill) workerRCU() float64 {
	if b.Mode == scan.ModeSegment && b.Workers > 0 {
		return b.tableRCU() / float64(b.Workers)
	}
	return b.tableRCU()
}

func (b readBill) consistency() string {
	if b.Consistent {
		return "strongly consistent (--consistent-read)"
	}
	return "eventually consistent (half the RCU of strongly consistent)"
}

// log states the estimate at a continuous worker's start.
func (b readBill) log(log *slog.Logger) {
	groupRCU := b.workerRCU() * float64(b.Workers)
	log.Info("dynapart: a continuous worker in "+string(b.Mode)+" mode scans its whole share again every pass; "+
		"for a table that mostly waits for new items use --mode index (the cost of a pass grows with pending items, not the table) "+
		"or cap this worker's reads with --read-rate RCU/s",
		"estimated_rcu_per_pass", math.Round(b.workerRCU()),
		"estimated_rcu_per_pass_all_workers", math.Round(groupRCU),
		"table_size_bytes", b.TableBytes, "reads", b.consistency(),
		"poll_interval", b.PollInterval.String(),
		"estimated_rcu_per_hour_at_most", math.Round(b.workerRCU()*float64(time.Hour)/float64(max(b.PollInterval, time.Second))),
	)
}

// warnReadBill logs the read bill of a continuous segment or filter worker from the table's
// size (DescribeTable's TableSizeBytes, updated by AWS about every six hours); nothing otherwise.
func warnReadBill(ctx context.Context, log *slog.Logger, db *dynamodb.Client, table string, b readBill) {
	if b.Mode != scan.ModeSegment && b.Mode != scan.ModeFilter {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := cli.Describe(cctx, db, table)
	if err != nil || t == nil {
		return
	}
	b.TableBytes = sizeOf(t)
	b.log(log)
}

func sizeOf(t *types.TableDescription) int64 {
	if t.TableSizeBytes == nil {
		return 0
	}
	return *t.TableSizeBytes
}
