// Package scan reads one worker's share of a DynamoDB table, resumably and within a read budget.
//
// N workers share a table by slot numbers 0..N-1 (see package lock). A [Scanner] for slot i reads
// only slot i's share, in one of three [Mode]s:
//
//   - [ModeSegment]: slot i scans its own parallel-scan segments (see [Plan.Segments]); the fleet
//     reads the table once.
//   - [ModeFilter]: every slot scans the whole table and keeps the items whose partition attribute
//     maps to it by [Partition]: integers by value mod N, other values by CRC-32 mod N, a missing
//     attribute to slot 0. N times the reads, but the split is a predictable function of the data.
//   - [ModeIndex]: slot i queries its shards of a sparse pending index ([CreatePendingIndex],
//     [MarkPending]); only pending items are read.
//
// # Guarantees
//
//   - The slots' shares are disjoint and together cover the table, for any fixed plan.
//   - Pages are delivered to the consumer one at a time; items are acknowledged ([Item.Ack]) in any
//     order. Each segment's position ([Scanner.Checkpoint]) passes a page only when all its items
//     are acknowledged, so a scanner resumed from a checkpoint ([Config.Resume]) reads again every
//     unacknowledged item. It may also re-read acknowledged items of a partly acknowledged page,
//     never items of fully acknowledged pages before it: at least once, at page granularity.
//   - A checkpoint made for another table, index, mode, slot or TotalSegments is refused with
//     [ErrCheckpointMismatch]; one that does not decode with [ErrBadCheckpoint].
//   - Memory is bounded by [Config.MaxUnackedPages] pages, not by table size.
//   - With [Config.ReadRate], reads stay near that many RCU per second, as DynamoDB reports them.
//   - [Scanner.Run] returns only after every goroutine it started has returned.
//
// # Example
//
//	sc, err := scan.New(scan.Config{Client: db, Table: "users", Plan: scan.Plan{Mode: scan.ModeSegment, Slots: 4}, Slot: slot})
//	err = sc.Run(ctx, func(ctx context.Context, p *scan.Page) error {
//		for _, it := range p.Items { handle(it.Attrs); it.Ack() }
//		return nil
//	})
//	checkpoint := sc.Checkpoint() // save it; Config.Resume continues from here
//
// # Throttling and read cost
//
// The AWS SDK's retryer retries throttled requests by itself. The scanner counts each throttled
// attempt with a middleware it adds per request just inside the retry loop, and reports it in
// [SegmentStats.Throttles]; no retryer needs to be configured. Every request asks for
// ReturnConsumedCapacity TOTAL, which feeds [SegmentStats.RCU] and the read-rate limiter.
package scan
