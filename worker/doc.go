// Package worker is the dynapart framework: N workers share the processing of a DynamoDB table so
// that every item is handled exactly once, survives worker crashes, and stays fast.
//
// # The loop
//
// [Worker.Run] takes a slot 0..N-1 of a lease group (package lock; waiting as a hot standby while
// every slot is held), resumes from the slot's checkpoint, reads the slot's share (package scan:
// parallel scan segments, a partition filter, or a sparse pending index), claims each item with a
// conditional write in the [Ledger], runs the [Handler] with bounded concurrency, completes the
// item with a write fenced on the claim, and saves the scan position on the lease as pages finish.
//
// # Guarantees
//
//   - Every item's state moves to done at most once, and, while workers keep running, at least once:
//     exactly once for the state.
//   - A handler's side effects are at-least-once: an item whose worker dies after the side effect but
//     before the completion write is handled again. [Item] carries the claim's fencing token and an
//     idempotency key (a hash of the job, the source table and the item key) to make side effects
//     idempotent.
//   - Partitioning is for speed, conditional writes are for correctness: a wrong N, a stale worker or
//     an overlap costs throughput, never a double completion.
//   - An effect returned with the completion is applied exactly once: with the item's completion, in
//     one atomic write, or not at all ([WithEffects], [Effects]).
//
// # Groups
//
// The workers of a group must agree on every setting that decides where item state lives or which
// items a slot reads. The first worker records them on the group's meta item (each only where it
// applies; n, the group's size, lock records itself); a worker that disagrees is refused with a
// *lock.GroupMismatchError whose Field names the setting, before it writes anything. [Settings]
// is the table of every setting; these are its group settings, with their Field and where they apply:
//
//	Table          meta.table           always
//	Workers        n                    always
//	Segments       meta.segments        segment and filter mode
//	Mode           meta.mode            always
//	SubSegments    meta.sub_segments    always
//	PartitionAttr  meta.partition_attr  filter mode
//	IndexName      meta.index_name      index mode
//	ShardAttr      meta.shard_attr      index mode
//	Shards         meta.shards          index mode
//	CompleteOnly   meta.complete_only   always
//	Once           meta.once            always
//	Versions       meta.versions        always
//	Job            meta.job             always
//	Ledger         meta.ledger          always
//	LedgerTable    meta.ledger_table    table ledger
//	AttrPrefix     meta.attr_prefix     inline ledger
//
// A group set up by an older version, whose meta item lacks a setting, is taken to have used that
// setting's default; one that lacks meta.once takes once- and continuous workers alike, as before.
// Once is a group setting because it decides how a slot's share is read: a once-worker's pass
// marks the units thieves may steal, and a continuous worker that took its slot over would ignore
// the markers.
//
// # Elastic groups
//
// A group's N changes only through [Resize] (lock.Client.ResizeGroup, `dynapart scale`), never
// by a worker's Workers: a worker with Workers 0 joins the group at its current N, one whose
// Workers differs is refused (Field "n"). A resize moves the group's plan epoch on. Every holder
// reads the meta item once per heartbeat; when the epoch has moved, it stops claiming as on a
// shutdown, saves its checkpoint (which records the epoch and N it was made under), releases the
// slot and takes one again at the new N. A holder of the new plan starts only once no slot is
// held under an older epoch, so the two plans never read a unit at once (an old holder's writes
// all end with its lease), and it composes its position from the latest checkpoint of each
// unit's previous owner: in segment mode the group's segments are fixed when it is created
// (Segments, [scan.DefaultTotal]) and slots own contiguous blocks of them, so nothing is read
// again beyond the pages in flight; index mode does the same with its shards; filter mode
// rescans each new share (items done are skipped without a handler call). Once-workers follow
// the new plan too; a once-worker whose slot is finished takes any free, unfinished slot
// before it exits.
//
// # Work stealing
//
// A once-worker whose slot is finished first takes any free, unfinished slot; when none is left
// (every slot finished or held: a lease not run out) it steals, unless Config.NoSteal: it keeps its
// finished slot's lease and takes scan units (segments in segment and filter mode, shards in index
// mode) that slots still working have not started, a few at a time (up to SubSegments, at most a
// third of those left) from the end of their share, and reads them with the owner's plan and filter
// under its own lease; then it releases its slot and, before it exits, takes any slot freed
// meanwhile, watching the held ones until each holder renews its lease or one runs out (helping.go;
// see Config.Once) (a slot of a one-slot plan, with nothing to steal, is marked finished,
// checkpointed and released by one write). Holders read from the front of their share, SubSegments
// units at once and whole pages ahead of their handlers, so units of one page each may all be
// started early and leave nothing to steal. Units stay exclusive through one marker item per unit
// per pass in the lease table, written with a conditional put before anyone reads the unit: every
// once-worker (also with NoSteal) of a plan of more than one slot marks the units of its passes,
// one conditional write per unit per pass (64 per pass of the group with 64 segments; a thief adds
// a few writes per stolen unit: its marker, its cursor every CheckpointInterval, done at the end).
// Units are stolen only among the slots of one plan, so a one-slot plan has no thief and its passes
// write no markers. An owner's pass is complete (and the slot may be marked finished) only when
// every unit a thief took is done; a thief that dies leaves its units, with the cursors it saved,
// to the owner, which reads them once the thief's lease has ended; an owner that dies leaves its
// markers to its slot's next holder. Handlers run exactly as in the owner's pass, so the guarantees
// above hold (a stolen item is claimed, and reported in Item.Slot and ItemEvent.Slot, under the
// thief's slot); in complete-only mode the markers alone keep two workers from reading a unit at
// once. A resize ends stealing like any pass, and the new plan composes its cursors from slot
// checkpoints only: a unit a thief had begun is read again from its owner's position (reads only:
// items done are skipped without a handler call). Continuous workers never steal. steal.go (the
// thief), share.go (the owner's markedShare), unitpass.go and unitmarker.go hold it; package lock
// stores the markers (lock.UnitPass, lock.Lease.MarkUnit).
//
// # Ledgers
//
// Item state lives in package ledger, which holds the item state machine (ledger/doc.go: every
// transition's condition and update, and why each item is done once) and both ledgers: the inline
// ledger keeps the state on the item (attributes dp_status, dp_owner, dp_slot, dp_token, dp_scope,
// dp_claim, dp_claim_until, dp_attempts, dp_retry_at, dp_error, dp_done_at, dp_failed_at; the
// prefix is Config.AttrPrefix); the table ledger keeps it in a separate table keyed by job and item
// key, so the source table is only read (in index mode a finished item's shard attribute is
// removed, so it leaves the pending index) and a new job name processes everything again. The
// worker writes no item state itself: it calls the ledger.Ledger interface, and its prefilter
// evaluates the ledger's own conditions (Ledger.Allows) on the state a scan read. This package's
// Ledger, Claim, Status and the other ledger names are aliases of package ledger's, kept for one
// release.
//
// # Outages
//
// A standby waits through any outage of DynamoDB. A slot holder whose passes fail keeps its lease
// while its heartbeat gets through and retries from its checkpoint (1s doubling up to 30s apart)
// for Config.OutageTimeout (default 15m; negative: for ever), then Run returns the last error. A
// request DynamoDB refuses for every item alike (AccessDeniedException on a ledger write, an effect
// commit or a versioned worker's read of an item; a table gone, or one an effect commit names that
// does not exist) fails the pass the same way, its claim given back. A holder whose heartbeat fails
// too loses its lease at expiry and becomes a standby. A worker that starts during an outage
// retries its start reads (the tables' descriptions, the group) the same way and for as long; what
// no wait cures (lock.Retryable: a missing table, a wrong setting, refused credentials) is returned
// at once.
//
// # Effects
//
// A handler wrapped with [WithEffects] returns, with its result, writes to commit with the item's
// completion: an update of the item itself and writes to other items (ledger.Effects). The ledger
// commits them in the completion's own write (an update of an inline ledger's item alone) or in one
// transaction with it, so a handler that runs twice (a crash, a lost lease) commits one run's
// effects. Effects the ledger refuses (a key or ledger attribute, a failed condition of the
// handler's own write) dead-letter the item with the error naming the effect; nothing is applied. A
// commit IAM denies (a table the role may not write) or that names a table that does not exist
// fails the pass instead (see Outages): every item that writes that table would meet it. A wrapper
// between Run and the WithEffects handler passes on Run's Item or a copy (it2 := it): effects
// returned for a new Item fail the attempt ([ErrEffectsNotCarried]), as do two calls' effects for
// one Item ([ErrEffectsTwice]); they are never dropped.
//
// # Handler errors
//
// nil completes the item. A plain error is a failed attempt, retried with exponential backoff until
// Config.MaxAttempts, then dead-lettered with the error text. [RetryAfter] sets the next attempt's
// time; [Permanent] dead-letters at once. A panic is recovered and counts as a failed attempt.
// Complete-only mode (Config.CompleteOnly) counts failed attempts the same way; its completing
// write sets only the status, done_at, its own id (claim) and, with Config.Versions, the version,
// unless Config.CompleteOnlyAudit.
//
// # Handler contexts
//
// A handler's context is cancelled with cause [ErrClaimExpiring] shortly before its claim expires,
// when the lease is lost, or with [ErrStopped] once Config.DrainTimeout has passed after shutdown
// began. A handler must return soon after: one still running Config.HandlerGrace (default 5s)
// after its context was cancelled is abandoned. The worker counts it (Stats.Abandoned, the
// OutcomeAbandoned event), logs it, leaves its goroutine running and the item to be claimed again
// once its claim expires (ledger.OpAbandon keeps the slot's next holder from taking it over
// earlier by its newer token; a worker whose lease is already lost cannot write that, and its
// next holder may take the item over at once), so Run returns and the slot lease's promises
// hold; the abandoned handler's own completion can then no longer land (the ledger fences it).
//
// A handler interrupted by the shutdown (its context cancelled with ErrStopped) is not a failed
// attempt: its claim is released (unless the lease is already lost: the slot's next holder then
// reclaims it) and the attempt not counted. A handler that sees the stop coming by other means, or
// causes it (the CLI's --exec stops the run when the reader of the worker's output has exited),
// may say so before DrainTimeout: an error wrapping [ErrStopped], returned once the worker is
// stopping (Run's context done, Config.DeadlineMargin reached, or the group resized), is such an
// interruption too, logged with its error. Returned while the worker is not stopping, or when the
// handler's claim is about to expire, it is a failed attempt like any other error.
//
// A claim's expiry is stored padded by Config.MaxClockSkew, so a worker whose clock runs ahead
// by up to MaxClockSkew takes it over only after the holder's own clock has passed the claim's
// end; the handler's context is cancelled a margin (a tenth of ClaimTTL, at most 5s) before that.
//
// Writes that record an outcome (claim, complete, retry, dead letter, release) are not cut short by
// shutdown; Config.WriteTimeout bounds each of them, Config.LeaseWriteTimeout the lease writes made
// while stopping (checkpoint, finish, release). They end with the slot's lease, though: once the
// lease is lost or has expired by the worker's clock, no ledger write made for the slot is sent,
// not even the SDK's repeat of one sent before. A write so cut short has an unknown outcome, which
// is settled by reads only (no claim is undone or released after the lease ended): the claim
// stays until the slot's next holder reclaims it at once by its newer token, or it expires, and
// the items the pass had not acknowledged are rescanned by the next holder.
//
// A group can be paused (lock.Client.PauseGroup, `dynapart pause`): a slot holder reads the flag
// once per heartbeat and, while it is set, claims nothing new (batch claims whose handler has not
// started are given back), lets handlers in flight finish, starts no pass, does not mark its slot
// finished, and keeps its lease; [Stats].Paused says so. On resume the pass goes on where it
// stopped. A group with a capacity budget ([Config].MaxWCU, MaxRCU) pauses itself the same way
// when its workers' reported consumption reaches it (budget.go; see lock.Client.SetBudget). Each
// slot's checkpoint also carries its counts (items done and failed, items read and
// working time in the current pass), which [ParseSlotProgress] reads back for `dynapart status`;
// a following slot's done and failed include the items the stream brought.
//
// # Following the stream
//
// A continuous worker with Config.Follow back-fills its share with one pass and then follows the
// table's DynamoDB stream instead of scanning again (follow.go, follow_resolve.go; package follow
// reads the stream: shards leased among the group's workers, checkpoints). An item's version is
// its content (every attribute but the ledger's); with Config.Versions (implied by Follow) every
// write that finishes an item records the version handled, and a record that changes an item's
// content makes it a candidate, resolved once the item's current version is recorded as
// finished: a finished item at an older version is reopened (ledger.OpRenew) and handled as a
// pass would. Each version moves to done once, whichever of the pass and the stream brings it (a
// complete-only write, which no claim fences, names the state it judged the item by:
// ledger.ClaimRequest.Seen);
// none is handled after a newer one; writes that change no content and deleted items are not
// handled. [Worker.HandleRecords] resolves records a caller reads itself (worker/awslambda's
// stream handler).
//
// # Code map
//
// worker.go is the lifecycle: [New] and [Worker.Run], which reads as standby -> slot -> finished
// (runState: take a slot as a hot standby, or helping once a slot is finished; run it; back to
// standby, or finished). env.go is what Run prepares once (the tables, the ledger, the group's
// settings). slot.go is one held lease (type slot, and how it ends: slotEnd): its start, its loop
// of passes, finishing and release. pass.go is one pass over a share: its contexts, the drain
// timer, the checkpoint saver, the handler pool and the completer, each a method of pass, which
// embeds its slot; share.go is what a pass reads (the slot's whole share, or its share with units
// marked for thieves); keyedpass.go a once-job's next pass that reads only the items the last one
// left, by key, instead of the whole share; dispatch.go hands scanned items to the handlers (prefiltering and batch
// claims); process.go claims one item, runs the handler and records the outcome; effects.go is how
// a handler's effects reach the ledger (WithEffects); handlers.go and completeonly.go hold the
// handler timing and complete-only mode; steal.go, unitpass.go and unitmarker.go work stealing;
// pause.go the pause and resize watch; helping.go a once-worker's watch of the held slots before it
// exits; budget.go the group's budget; slotcheckpoint.go the slot checkpoint and its counts;
// join.go, replan.go, planstart.go and resize.go the group's plan (joining, changing plans,
// resizing); aliases.go the names that moved to package ledger.
//
// # Example
//
//	w, err := worker.New(worker.Config{Client: db, Table: "users", Workers: 4, Once: true})
//	if err != nil { return err }
//	err = w.Run(ctx, func(ctx context.Context, it worker.Item) error {
//		return sendEmail(ctx, it.Key, it.IdempotencyKey)
//	})
package worker
