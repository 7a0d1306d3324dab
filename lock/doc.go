// Package lock hands out leases on a DynamoDB lock table: N workers take slots 0..N-1 of a group
// (AcquireSlot), or one process takes a named Mutex. It is the identity step of dynapart's process
// partitioning: the slot number says which share of the table a worker reads.
//
// # Guarantees
//
//   - At most one holder per slot at a time, as long as the holders' clocks differ by less than
//     MaxClockSkew (or with WithSkewImmune, regardless of clock offsets): a holder's
//     [Lease.Context] is cancelled at its expiry minus the safety margin, before anyone may take
//     the slot over.
//   - Every acquisition increments the slot's fencing token ([Lease.Token]); every write after
//     acquisition (renew, [Lease.SaveCheckpoint], [Lease.MarkFinished] and its combinations
//     [Lease.FinishWithCheckpoint] and [Lease.FinishAndRelease], [Lease.Release]) is a
//     conditional write on owner and token, so a stale holder fails with [ErrLeaseLost] and
//     changes nothing.
//   - A take is conditioned on the token, version and expires_at it read, and a renew on the
//     version it replaces, so every renew that lands moves the version on and a contender whose
//     read predates it cannot take the slot. A renew whose answer is lost is settled by a
//     consistent re-read: when a renew of ours landed, the lease adopts the item's version and
//     expiry (what contenders see), never the expiry it meant to write. A renew may take half the
//     time left until the local expiry (at least a heartbeat), so a server slower than a
//     heartbeat (a loaded DynamoDB Local, throttling retries) still renews the lease.
//   - A standby takes a slot as soon as it is released, or once it has expired; a lease whose
//     renewals stop (crash, lost connection) ends in a cancelled context, never a hang. In a
//     group of up to 64 slots every poll reads the whole group, so a standby finds a free slot at
//     its next poll, and one that saw a lease that will run out before its next poll looks
//     again just after it does (expires_at + MaxClockSkew, or a full TTL watched with
//     WithSkewImmune, spread over a tenth of the poll interval), so a takeover after a crash
//     waits for the lease, not for the poll as well. A larger group is read 64 slots at a time
//     (plus the meta item), so a poll costs the same whatever n is: a lone standby looks at every
//     slot within ceil(n/64) polls, and standbys start at random windows, so a fleet of n/64 or
//     more standbys looks at most slots at every poll. A standby's first round (until one completes), a round after one that
//     lost the races for free slots, and TryAcquireSlot read window after window until one has a
//     free slot (and on, when others take that window's free slots first); a poll whose window
//     is all finished reads on to the next one.
//   - An acquisition whose answer is lost (timeout, reset connection) is settled by its nonce: the
//     write that landed is the caller's lease, even when the SDK's retry then fails its
//     condition; one that lands only after the caller gave up is adopted by the Client's next
//     round (or released at once when already expired), so no slot sits held by nobody.
//   - A group records n (and optional meta) on its meta item; a caller that disagrees gets a
//     *[GroupMismatchError] instead of overlapping with the others. [WithGroupMetaDefaults] says
//     what a key missing from an older meta item stands for.
//   - The plan is (n, epoch) on the meta item. [Client.ResizeGroup] changes n and moves the epoch
//     on by one in a single conditional write on the n and epoch it read, so concurrent resizes
//     serialise and every plan has its own epoch; a resize whose answer is lost is settled by a
//     re-read (see there). A resize writes only the meta item: holders learn of it from
//     [Client.PeekGroup] (one eventually consistent GetItem a heartbeat, confirmed by
//     [Client.GroupState] when it shows a change) and stay holders
//     until they release; [Client.OldPlanHolders] tells a new-plan holder when none of the old
//     plan is left.
//   - [Client.ReadGroup] is GroupState for a caller about to acquire (a worker starting): one
//     Query reads the meta item with slots 0..63, and the client's next round for the group, if it
//     starts within a poll interval and the group has at most 64 slots, takes that read as its
//     first view instead of reading again (a view that disagrees with the caller's n or meta is
//     read again before the round refuses it; a stale view loses its takes' races at worst). The first holder of a new group writes the meta item
//     after its take; [Lease.GroupAfterTake] returns it, a read of the plan made after the take.
//   - Every acquisition records on the slot item the epoch of the meta item its round read
//     ([Lease.Epoch]), and competes only for slots 0..n-1 of the n of that same read (a caller's n
//     must equal it): a slot is taken under a plan (n, epoch) the meta item held.
//   - A slot is finished only under the epoch its holder acquired it under: it counts as finished
//     when finished is set and its epoch is the group's current one. A resize re-opens every
//     slot (a take of a slot finished under an older epoch passes the take's condition and clears
//     finished), and a MarkFinished by a holder of the old plan after the resize does not count.
//     ErrGroupFinished means every slot 0..n-1 was finished under the current epoch: the round
//     that sees it re-reads the meta item and reports it only when n and epoch are unchanged.
//   - AcquireSlot and TryAcquireSlot with n = 0 join the group at its current n, read from the
//     meta item every round (a standby waiting across a resize competes for the new slots at its
//     next poll; a group the client last saw with at most 64 slots is read with its meta item in
//     one Query, and the first round after ReadGroup uses that read); a group without a meta item is refused with ErrGroupNotFound at once, and a join
//     never creates one. A resize does not change what n > 0 means: a caller whose n differs from
//     the meta item's still gets a *GroupMismatchError.
//   - [Client.ResetGroup] moves the epoch on too and records it as the reset epoch
//     ([GroupState.ResetEpoch]), so a caller that keeps positions per epoch can tell the run
//     before the reset from the one after it.
//
// # Example
//
//	locks, _ := lock.New(db, "dynapart-leases", lock.WithLeaseTTL(10*time.Second))
//	lease, err := locks.AcquireSlot(ctx, "emails", 8) // waits as a standby while 8 are held
//	if err != nil { return err }
//	defer lease.Release(context.WithoutCancel(ctx))
//	work(lease.Context(), lease.Slot(), lease.Checkpoint()) // stops when the lease is lost
//
// # Data model
//
// The lease table (pk S, sk N; see [CreateTable]) is written by this package alone. Its items:
//
//   - Slot item, pk "group#<name>", sk the slot (0..n-1; slots at or past n, retired by a resize
//     to a smaller n, stay with their checkpoints, and [Client.GroupStatus] lists them). owner,
//     token (the fencing token, +1 per acquisition), version (+1 per renew), expires_at (ms,
//     holder's clock), acquired_at, nonce (random, fresh per acquisition: it tells which of the
//     concurrent acquisitions of one Client, which all write the same owner, made the holder),
//     released (the holder gave the slot back), checkpoint (the holder's saved position, see
//     [Lease.SaveCheckpoint]), finished (see [Lease.MarkFinished]), epoch (the plan epoch the
//     holder acquired under; absent: 0). Written by an acquisition ([Client.AcquireSlot],
//     [Client.TryAcquireSlot]), then only through its [Lease], fenced on owner and token (renew,
//     SaveCheckpoint, MarkFinished, Release); [Client.ResetGroup] clears its owner, finished and
//     checkpoint.
//   - Meta item, pk "group#<name>", sk -1. n (the group's slot count), epoch (the plan epoch, +1
//     per [Client.ResizeGroup] and [Client.ResetGroup]; absent: 0), reset_epoch (the epoch the
//     last reset started), meta (the caller's [WithGroupMeta] values), paused and paused_reason
//     (see [Client.PauseGroup]), and the group's budget: budget_wcu, budget_rcu, used_wcu,
//     used_rcu (see [Client.SetBudget]). Written by the group's first holder after its take,
//     ResizeGroup, ResetGroup, PauseGroup, ResumeGroup, SetBudget, AddUsage and PauseForBudget.
//   - Mutex item, pk "mutex#<name>", sk 0: the attributes of a slot item. Written by [Mutex].
//   - Unit marker, pk "units#<group>#e<epoch>#s<slot>#p<pass>.<run>" (see [UnitPass]), sk the scan
//     unit (segment or shard). owner, slot and token (the slot lease holding the unit), done
//     (BOOL), and once written: cursor (the unit's scan position), dirty (BOOL), done_items,
//     failed_items, scanned_items (what a thief counted, see [UnitMarker]). Put by
//     [Lease.MarkUnit] where none exists; then written only by [Lease.TakeOverUnit] (conditioned
//     on the slot and token it names; a take-over whose answer was lost and whose repeat fails
//     that condition is settled by the marker the refusal returns, or a consistent read of it:
//     taken when it names the caller), [Lease.SaveUnitCursor] and [Lease.FinishUnit] (conditioned
//     on the writer's slot and token). Read by [Client.UnitMarkers]. The worker's once-workers
//     mark the units of their passes so that finished slots can steal units of slots still
//     working.
//   - Plan start, pk "plan#<group>", sk the plan epoch. start (B): a [PlanStart] as gzipped JSON,
//     where every scan unit stood when the epoch began. Put by [Lease.StorePlanStart] (the
//     lease's epoch) where none exists, so every holder of the epoch reads the same one; read by
//     [Client.PlanStart] and [Client.LatestPlanStart].
//
// Every write through a Lease (the slot item's, a unit marker's, a plan start's) is refused
// without a request once the lease has ended (an error wrapping [ErrLeaseLost]). Nothing deletes
// unit markers or plan starts: they are small, and a new pass or epoch has keys of its own.
package lock
