// Package ledger is where an item's processing state lives and the only code that writes it: the
// item state machine, both ledgers that store it (Inline: attributes on the item; Table: a row of
// a separate table per job and item), the settling of writes whose answer was lost, redrive, and
// the write gate every write passes. Every exactly-once promise of dynapart rests on this package;
// this file and machine.go hold the whole argument.
//
// # States
//
//	pending  no state (a new item, a redriven one, or one whose state an operator removed)
//	claimed  a worker holds it: owner, slot, lease token, scope, claim id, claim_until, attempt
//	retry    a failed attempt, a claim given back (release) or a finished item reopened for a new
//	         version (renew): pending again once retry_at has passed
//	done     completed; final
//	failed   dead-lettered with the last error; final until redriven
//
// An item that does not exist (the inline ledger's item was deleted) reads as pending, but no
// write ever creates it again: every inline write that does not imply a state requires the item
// to exist.
//
// # Transitions
//
// Each transition is one conditional write (an UpdateItem, or one item of a batch); its condition
// and update are defined once, in machine.go, as typed trees that are rendered for DynamoDB,
// evaluated on scanned items by the worker's prefilter (Ledger.Allows), and checked against a row
// read back to settle a write whose answer was lost. A claim's id is unique to it (96 random bits,
// chosen by the claimer), so a row that shows a claim id shows the very claim that wrote it.
//
// The table gives, for each transition, what it does in each state it may meet: ✓ it writes, ·
// it is refused and nothing is written (the caller learns the state it met).
//
//	                       pending  retry   retry  claimed  claimed  claimed   claimed   done  failed  gone
//	                                due     later  expired  older    live,     (caller's
//	                                                        token¹   other     claim)
//	OpClaimFresh            ✓       ·²      ·²     ·²       ·²       ·²        ·²        ·     ·       ·
//	OpClaim                 ✓       ✓       ·      ✓        ✓        ·         ·³        ·     ·       ·
//	OpComplete, OpRetry,    ·⁴      ·⁴      ·⁴     ·⁴       ·⁴       ·⁴        ✓         ·⁴    ·⁴      ·⁴
//	 OpDeadLetter,
//	 OpRelease, OpAbandon
//	OpCompleteOnlyFresh     ✓       ·²      ·²     ·²       ·²       ·         ·         ·     ·       ·
//	OpCompleteOnly⁹,        ✓       ✓⁵      ✓⁵     ✓        ·⁶       ·         ·         ·     ·       ·
//	 OpFailOnly(Dead)⁹
//	OpExhausted             ·       ✓⁷      ✓⁷     ·        ·        ·         ·         ·     ·       ·
//	OpRedrive               ·       ·       ·      ·        ·        ·         ·         ·     ✓       ·
//	OpRenew⁸                ·       ·       ·      ·        ·        ·         ·         ✓     ✓       ·
//
//	¹ claimed under an older lease token of the caller's slot, in the caller's scope (same lease
//	  table and group): its holder has lost the slot, so the new holder takes its items over at
//	  once. A claim whose handler was abandoned (OpAbandon removed its scope) only expires.
//	² a fresh claim refused because the item has gained a state since the scan is made again
//	  under the general condition (OpClaim); a fresh complete-only write is not (see ⁹).
//	³ the caller's own claim: a claim whose answer was lost is recognised by its id (the row shows
//	  it), not claimed twice.
//	⁴ the fence: the item must be claimed under the caller's claim id. Anything else (taken over
//	  after expiry or by a newer token, completed without a claim, reset, redriven, deleted) makes
//	  the write a *ClaimLostError carrying the state found, and the worker looks at the item again
//	  unless it is finished. A write whose answer was lost and whose repeat is refused is the
//	  caller's when the row shows its update under its claim id.
//	⁵ complete-only ignores retry_at (its own failures set it; a pass comes back at that time).
//	⁶ a live claim, by claim_until, of another group: complete-only groups make no claims, so
//	  this is always another group's. Left alone until it expires (README: a worker of another
//	  group leaves a live claim alone until it expires).
//	⁷ only the retry the caller's own OpFailOnly wrote (same id): that write used up the last
//	  attempt.
//	⁸ a versioned ledger only (WithVersions), and only the finished state the caller read: the
//	  condition names its claim id (every write that changes a state sets a new one). The item
//	  becomes a retry due at now less WithMaxClockSkew (due at once on every worker's clock) with
//	  attempts 0; the version recorded by the finishing write stays.
//	⁹ only while the item shows the claim id of the state the caller saw (ClaimRequest.Seen), or
//	  none when it saw none (a claim, a write without a claim, OpRenew and OpRedrive each set a new
//	  one); OpCompleteOnlyFresh so too in a versioned ledger. A complete-only write prepared for a
//	  version that was finished and reopened (OpRenew, by a versioned group of the same job) or
//	  redriven since is refused, so it neither finishes the new version with the old one's run
//	  (nor commits its effects again) nor counts its failure against it. A fresh write refused
//	  for a state gained since is not made again: the caller looks at the item again.
//
// # Why each item is done at most once
//
// Only OpComplete, OpCompleteOnly(Fresh) move an item to done. OpComplete requires the caller's
// claim to be current, and a claim is current for one claimer at a time: OpClaim takes an item
// only when no claim holds it (none, expired, or of a holder whose slot lease has passed to the
// caller), and the claim it writes carries a fresh id, so every older claimer's fenced write is
// refused from then on. OpCompleteOnly requires that the item is not done, not failed and not
// held by a live claim. Done has no transition out, but OpRenew in a versioned ledger, which
// reopens it for a new version under a new claim id that fences OpComplete and, through
// ClaimRequest.Seen, OpCompleteOnly: so each version is done at most once. So a second completion is refused whoever
// sends it: a stale worker, a worker of another group, or the same worker repeating a write.
//
// # Why each item is done at least once, while workers run
//
// Every refused write reports the state it met. The worker skips a finished item for good and
// looks at any other again: a live claim at its expiry, a retry at its time, a pending item at
// once. A claim whose holder dies expires (or is taken over at once by the slot's next holder);
// a claim whose answer was lost is settled by a read or undone (OpRelease on its id), so it uses
// up no attempt (unless it lands after the settling read: then it expires, and counts). An attempt that ends without an outcome still counts (the claim added it), so a
// poison item reaches MaxAttempts and is dead-lettered instead of looping for ever.
//
// # Claim expiry and clocks
//
// A claim's claim_until is the claimer's deadline (ClaimRequest.Until) plus the claimer's
// WithMaxClockSkew, and another worker takes the claim over only once claim_until <= its own
// now. With clocks that differ by at most the skew, that is after the holder's own clock passed
// Until; the worker cancels its handler's context a margin before Until. So no other worker starts
// a handler of the item while the holder's handler context is live. A handler that goes on after
// its context is cancelled may still be running then: the worker waits Config.HandlerGrace for it,
// then abandons it (OpAbandon keeps its claim for its full expiry, so at least the slot's next
// holder does not take it over at once); side effects are at-least-once for this reason too.
//
// The skew works the other way for a renew and a release (or the undo of a claim whose answer was
// lost): the item's retry_at is the writer's now less the skew, so that every worker finds it due
// at once, whatever its clock.
//
// # Effects
//
// CompleteWith and CompleteOnlyWith commit a handler's Effects with the completion: the inline
// ledger merges an update of the item alone into the completion's UpdateItem (one write); any
// other effect goes in one TransactWriteItems whose first item is the completion, with a
// ClientRequestToken derived from the claim's id. The completion's condition is the guard: it
// admits one completion per claim, so the effects of a handler that ran twice, or of a commit sent
// twice, land once. A failed condition of the caller's own write cancels the whole commit (an
// *EffectError naming it); conflicts and throttling are retried. A commit DynamoDB refuses for a
// table it names that does not exist, or that IAM denies, is returned as an error naming the
// ledger (and the tables its writes name), no *EffectError, nothing applied: every item writing
// that table would meet it, so the worker fails its pass. Effects that would write the
// ledger's own state (a ledger attribute, the table ledger's table, the item itself as another
// write) are refused before anything is written, a table named by ARN as by name, and so is text
// that is not UTF-8 (DynamoDB would store U+FFFD for its bad bytes: the item would not be what the
// completion records as the version handled), and values no write can carry (a nil attribute
// value, an empty attribute name in a map, a number DynamoDB does not store, an empty set or one
// with a member twice, a NULL whose Value is false, a binary whose Value is nil: DynamoDB's own
// refusal names only a placeholder), with their path.
//
// # Versions
//
// A versioned ledger (WithVersions; a worker that follows the table's stream) records with every
// write that moves an item to done or failed the version of the content its caller handled
// (Claim.Version, ClaimRequest.Version; ContentVersion hashes every attribute but the inline
// ledger's, so its own writes are no new version; Effects.AppliedTo gives the content an item's
// own effects leave, so a transform's output is not taken for a new version). An item is due
// again exactly when its current content's version differs from the recorded one: OpRenew reopens
// it. Done is still final for each version: the renew is conditioned on the very finished state
// its caller read, so two callers that saw one finished state renew it once, and a version handled
// meanwhile (a new claim id) is not renewed; the renewed item is then claimed and completed under
// the same transitions as any other, once.
//
// # Costs
//
// Each transition is one write of the state row (1 WCU for an item under 1 KB, also when its
// condition fails; 2 per item in a transaction). The fresh forms exist because DynamoDB Local
// evaluates a short condition faster; on DynamoDB the cost is the same.
//
// Batched claims (Claim with several requests) and batched completions (CompleteBatch) are sent as
// PartiQL statement batches (BatchExecuteStatement, statement.go): each statement is the same
// transition rendered as an UPDATE, a single conditional write billed as one and answered on its
// own, so a batch costs what its writes would cost one by one, in one request. A statement refused
// by its condition is settled from the old item its answer carries (or a read), a batch whose
// answer was lost as a whole like a transaction's, and a throttled or conflicting statement is sent
// again. The table ledger's fresh claims create their rows, which an UPDATE does not: they are
// INSERTs (a row that exists fails with DuplicateItem and is claimed by an UpdateItem under the
// transition's own condition). PartiQL has no form for an ADD to a missing count, so claims of
// items with a state (OpClaim) are single UpdateItems. A Claim that fails after some of its claims
// landed gives those back (OpRelease), so no claim its caller never learned of uses up an attempt.
// Every batch of a ledger built WithoutStatementBatches, or whose backend failed statement batches
// as a whole or denied a statement (IAM), goes in transactions. ConsumedWCU counts every write
// DynamoDB bills (not a throttled or invalid one) at no less than its least charge.
//
// # Example
//
//	l, err := ledger.NewInline(db, "users", []string{"id"}, ledger.WithMaxClockSkew(time.Second))
//	if err != nil { return err }
//	now := time.Now()
//	outs, err := l.Claim(ctx, []ledger.ClaimRequest{{Key: key, Owner: "w1", Now: now, Until: now.Add(time.Minute)}})
//	if err == nil && outs[0].Claimed {
//		err = l.Complete(ctx, outs[0].Claim, time.Now())
//	}
package ledger
