// Package follow is the table's change stream as dynapart uses it: [EnableStream] turns a table's
// stream on (NEW_AND_OLD_IMAGES, `dynapart init --stream`), and a [Reader] reads it with its shards
// shared among the workers of a group, exactly where the group left off (`dynapart work --follow`).
//
// # Reading the stream
//
// Every Reader of a group (one per worker) lists the stream's shards every
// [ReaderConfig.PollInterval] and takes the ones it may read as leases on the lock table: shard s is
// the lock mutex [ShardMutex](group, s). A shard is read by one Reader at a time, in batches (one
// GetRecords page each) handed to Run's function; the shard's next page is read only once the
// batch is [Batch.Done], and its checkpoint (the sequence number of the batch's last record) is
// saved on the lease before that read. A reader takes up to [ReaderConfig.MaxShards] shards, and
// more only once a shard has stayed free for a few looks (its reader died, or the group has fewer
// readers than planned).
//
// # Guarantees
//
//   - Every record is delivered, in shard order. A shard without a checkpoint is read from its
//     start (TRIM_HORIZON), one with a checkpoint right after it (AFTER_SEQUENCE_NUMBER).
//   - Lineage: a child shard is read only once its parent is finished (closed, read to its end and
//     marked finished on its lease, which no reader takes again), so the records of one item key
//     arrive in write order across shard splits and rollovers. A parent no longer listed (trimmed
//     away) does not hold its child back.
//   - At most the batch in flight is delivered twice: a reader that dies (its lease stops being
//     renewed) loses its shards after the lock's lease TTL, and their next holders resume from the
//     checkpoints. Checkpoint writes are fenced on the lease's token, so a reader that lost a shard
//     cannot move it back; a batch Done after its lease was lost changes nothing.
//   - Records lost are never skipped silently: a checkpoint older than the stream's retention, a
//     parent shard gone from the stream (closed and trimmed away) whose lease the group had not
//     finished, or a stream turned off or deleted, ends Run with a *[TrimmedError]
//     ([ErrTrimmed]), and the caller must rescan the table. A Reader whose caller has rescanned
//     ([ReaderConfig.Rescanned]) reads such shards from their oldest record (and retires a gone
//     parent's lease) while the rescan covers the loss: for [Retention] (less an hour) after it
//     began, and never past a checkpoint the Reader saved itself. (A shard no reader had started before its first
//     records were trimmed cannot be told from one that had no more: it is read from what is
//     left; a caller judges such losses by time, as the worker does: [Reader.ReadThrough] says
//     how far the group has read the stream, the creation time of its oldest unread record, and
//     a caller that saves it and rescans once it is older than the retention misses no loss,
//     however many generations of shards went meanwhile. Empty pages do not read as a shard's
//     end, since DynamoDB may answer them although records lie further on: such a shard counts
//     as read as far as its checkpoint's own record, so an idle shard holds the time back until
//     it closes.)
//   - Transient errors (throttling, dropped connections, DynamoDB restarting, an expired shard
//     iterator) are logged and retried; they never end Run.
//
// # Example
//
//	arn, _, err := follow.EnableStream(ctx, db, "orders")
//	r, err := follow.NewReader(follow.ReaderConfig{Streams: dynamodbstreams.NewFromConfig(cfg),
//		StreamARN: arn, Locks: locks, Group: "orders/follow"})
//	err = r.Run(ctx, func(ctx context.Context, b *follow.Batch) error {
//		handle(b.Records) // in shard order
//		b.Done()          // the checkpoint may move past b's last record
//		return nil
//	})
//	if errors.Is(err, follow.ErrTrimmed) { /* records were lost: rescan the table */ }
package follow
