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
// # Segments and resizing
//
// In segment and filter mode the table is split into [Plan.TotalSegments] parallel-scan
// segments: [Plan.Total] when set, otherwise Slots*SubSegments (the layout of groups made before
// Total existed, which their checkpoints record). Total is fixed when a group is created and does
// not depend on Slots; [DefaultTotal] is the default for a new group, the smallest multiple of
// Slots*SubSegments that is at least 64, so the group can later have up to that many slots. In
// segment mode slot k of N owns the contiguous block of segments [floor(k*T/N), floor((k+1)*T/N)),
// which for T = N*SubSegments is the old rule (SubSegments consecutive segments per slot), and
// every segment belongs to exactly one slot for any N <= T (so Total bounds Slots). When N changes
// the blocks move, but the segments do not: whole segments pass to new owners with their cursors,
// and a slot resumes from a position composed of the cursors of the segments it now owns, taken
// from any slot's checkpoints (see [Position.Cursor]); nothing is read again but the pages that
// were not acknowledged. In filter mode every slot reads all T segments and keeps its items by
// [Partition] under the current N, so a change of N re-plans the whole scan. Index mode queries
// Config.Shards shards (slot k: shards s with s % N == k); Total does not apply.
//
// However many segments a slot owns, it has at most SubSegments requests in flight.
//
// # Guarantees
//
//   - The slots' shares are disjoint and together cover the table, for any fixed plan.
//   - Pages are delivered to the consumer one at a time; items are acknowledged ([Item.Ack]) in any
//     order. Each segment's position ([Scanner.Checkpoint]) passes a page only when all its items
//     are acknowledged, so a scanner resumed from a checkpoint ([Config.Resume]) reads again every
//     unacknowledged item. It may also re-read acknowledged items of a partly acknowledged page,
//     never items of fully acknowledged pages before it: at least once, at page granularity.
//   - A checkpoint made for another table, index, mode or TotalSegments, or with a cursor for a
//     segment (shard) the slot does not own under its plan, is refused with
//     [ErrCheckpointMismatch]; one that does not decode with [ErrBadCheckpoint]. Segments without
//     a cursor start from their beginning.
//   - Memory is bounded by [Config.MaxUnackedPages] pages, not by table size.
//   - With [Config.ReadRate], reads stay near that many RCU per second, as DynamoDB reports them.
//   - [Scanner.Run] returns only after every goroutine it started has returned.
//   - Work stealing: [Config.Only] restricts a scanner to some units of its slot (a worker that
//     took one segment or shard of another slot's share), and [Config.BeforeSegment] lets the
//     caller skip a unit just before it starts (one taken by such a worker): a skipped unit is not
//     read, keeps its cursor in checkpoints, and [Scanner.Done] ignores it.
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
