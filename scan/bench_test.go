package scan_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
)

// BenchmarkReadCost reads one table of 50,000 items with N = 4 slots running at once, in segment
// and in filter mode, and reports each mode's total RCU (as DynamoDB Local reports it in
// ConsumedCapacity) and items delivered per second. Filter mode should cost about N times as much.
func BenchmarkReadCost(b *testing.B) {
	const items, slots = 50_000, 4
	db := ddbtest.Client(b)
	table := ddbtest.CreateTable(b, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(b, db, table, makeItems("S", items, 0))
	run := func(mode scan.Mode) (rcu float64, perSec float64) {
		var delivered atomic.Int64
		scanners := make([]*scan.Scanner, slots)
		g, ctx := errgroup.WithContext(context.Background())
		start := time.Now()
		for slot := range slots {
			sc, err := scan.New(scan.Config{Client: db, Table: table, Slot: slot, Plan: scan.Plan{Mode: mode, Slots: slots}})
			require.NoError(b, err)
			scanners[slot] = sc
			g.Go(func() error {
				return sc.Run(ctx, func(_ context.Context, p *scan.Page) error {
					for _, it := range p.Items {
						it.Ack()
					}
					delivered.Add(int64(len(p.Items)))
					return nil
				})
			})
		}
		require.NoError(b, g.Wait())
		took := time.Since(start)
		require.EqualValues(b, items, delivered.Load())
		for _, sc := range scanners {
			rcu += sc.Stats().RCU
		}
		return rcu, float64(items) / took.Seconds()
	}
	var segRCU, segRate, filRCU, filRate float64
	for b.Loop() {
		segRCU, segRate = run(scan.ModeSegment)
		filRCU, filRate = run(scan.ModeFilter)
	}
	b.ReportMetric(segRCU, "segment-RCU")
	b.ReportMetric(filRCU, "filter-RCU")
	b.ReportMetric(filRCU/segRCU, "filter/segment")
	b.ReportMetric(segRate, "segment-items/s")
	b.ReportMetric(filRate, "filter-items/s")
}
