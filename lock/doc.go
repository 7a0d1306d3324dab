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
//     acquisition (renew, [Lease.SaveCheckpoint], [Lease.MarkFinished], [Lease.Release]) is a
//     conditional write on owner and token, so a stale holder fails with [ErrLeaseLost] and
//     changes nothing.
//   - A take is conditioned on the token, version and expires_at it read, and a renew on the
//     version it replaces, so every renew that lands moves the version on and a contender whose
//     read predates it cannot take the slot. A renew whose answer is lost is settled by a
//     consistent re-read: when a renew of ours landed, the lease adopts the item's version and
//     expiry (what contenders see), never the expiry it meant to write.
//   - A standby takes a slot as soon as it is released, or once it has expired; a lease whose
//     renewals stop (crash, lost connection) ends in a cancelled context, never a hang. In a
//     group of up to 64 slots every poll reads the whole group, so a standby finds a free slot at
//     its next poll. A larger group is read 64 slots at a time (plus the meta item), so a poll
//     costs the same whatever n is: a lone standby looks at every slot within ceil(n/64) polls,
//     and standbys start at random windows, so a fleet of n/64 or more standbys looks at most
//     slots at every poll. A standby's first round (until one completes), a round after one that
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
// Lease table: pk (S) "group#<name>" or "mutex#<name>", sk (N) the slot (0 for a mutex, -1 for the
// group's meta item). Slot attributes: owner, token, version (+1 per renew), expires_at (ms,
// holder's clock), acquired_at, nonce (random, fresh per acquisition: it tells which of the
// concurrent acquisitions of one Client, which all write the same owner, made the holder),
// released (the holder gave the slot back), checkpoint (the holder's saved position, see
// [Lease.SaveCheckpoint]), finished (see [Lease.MarkFinished]). The meta item holds n (the group's
// slot count), meta (the caller's [WithGroupMeta] values) and paused (see [Client.PauseGroup]).
package lock
