package ledger

// This file is the item's state machine: every transition's condition and update, defined once.
// doc.go holds the same machine as a table, with the argument for why it is exactly once.
// Nothing else in dynapart spells a status or a condition: the writes render these trees, the
// worker's prefilter evaluates them on scanned items (Ledger.Allows), and a write whose answer
// was lost is settled by checking whether the row shows its update (core.applied).

// Op is one transition of the item state machine.
type Op int

// The transitions. Each is one conditional write of the item's state row.
const (
	// OpClaimFresh claims an item the scan saw with no state: pending -> claimed, attempt 1.
	OpClaimFresh Op = iota + 1
	// OpClaim claims an item that is pending, due for a retry, claimed under an expired claim, or
	// claimed under an older lease token of the caller's slot in the caller's scope: -> claimed,
	// attempt + 1.
	OpClaim
	// OpComplete: claimed (the caller's claim) -> done.
	OpComplete
	// OpRetry: claimed (the caller's claim) -> retry, due at retry_at, with the error.
	OpRetry
	// OpDeadLetter: claimed (the caller's claim) -> failed, with the error.
	OpDeadLetter
	// OpRelease: claimed (the caller's claim) -> retry, due now less the skew (due at once on
	// every clock within it, as OpRenew), the attempt not counted. Also the undo of a claim whose
	// answer was lost.
	OpRelease
	// OpAbandon: claimed (the caller's claim) stays claimed, but only its expiry frees it: a
	// newer lease token of the slot no longer takes it over at once (its handler still runs).
	OpAbandon
	// OpCompleteOnlyFresh: pending (no state) -> done, without a claim.
	OpCompleteOnlyFresh
	// OpCompleteOnly: pending, retry, or claimed under an expired claim -> done, without a claim.
	OpCompleteOnly
	// OpFailOnly records a failed complete-only attempt: as OpCompleteOnly's condition -> retry,
	// attempt + 1.
	OpFailOnly
	// OpFailOnlyDead records a permanently failed complete-only attempt: -> failed, attempt + 1.
	OpFailOnlyDead
	// OpExhausted dead-letters an item whose OpFailOnly write (the caller's) used up its last
	// attempt: retry (that write) -> failed.
	OpExhausted
	// OpRedrive: failed -> pending (no state; the last error kept as last_error).
	OpRedrive
	// OpRenew: done or failed, finished by the write whose claim id the caller read -> retry, due
	// now less the skew (due at once on every clock within it), attempts 0: a new version of a finished item (see WithVersions and Renew). The version
	// the finishing write recorded is kept: it is the version handled last.
	OpRenew
)

var opNames = map[Op]string{
	OpClaimFresh: "claim", OpClaim: "claim", OpComplete: "complete", OpRetry: "retry",
	OpDeadLetter: "dead-letter", OpRelease: "release", OpAbandon: "abandon",
	OpCompleteOnlyFresh: "complete-only", OpCompleteOnly: "complete-only", OpFailOnly: "record failure",
	OpFailOnlyDead: "record failure", OpExhausted: "dead-letter", OpRedrive: "redrive", OpRenew: "renew",
}

func (o Op) String() string { return opNames[o] }

// transition is one Op's condition and update.
type transition struct {
	op   Op
	cond cond
	upd  update
}

// shape is what a ledger adds to the machine: the inline ledger never creates an item (every
// write that does not imply a state needs the item to exist), the table ledger writes its row's
// identity with the first write, and either may remove attributes when an item is finished.
type shape struct {
	mustExist    bool    // inline: attribute_exists(#exists) on the writes that may meet no item
	ident        []setTo // table: the row's job, source and item key, set by the writes that may create it
	removeOnDone []attr  // removed by done and failed
	audit        bool    // complete-only records owner, slot and token and counts the attempt
	versioned    bool    // the writes that finish an item record its content version
}

// The conditions, by state.
var (
	// fenced: the caller's claim is the item's current claim. A claim's id is unique, so nothing
	// but the claim write that made it can have set it.
	fenced = and(eq(aStatus, vClaimed), eq(aClaim, vClaim))
	// claimable: no state, a retry that is due, or a claim that expired or was made under an
	// older lease token of the caller's slot in the caller's scope (tokens count per group and
	// lease table: another group's token says nothing about this one). A claim's claim_until is
	// padded by its claimer's MaxClockSkew, so "expired" holds by every clock within that skew.
	claimable = or(
		missing(aStatus),
		and(eq(aStatus, vRetry), or(missing(aRetryAt), le(aRetryAt, vNow))),
		and(eq(aStatus, vClaimed), or(missing(aClaimUntil), le(aClaimUntil, vNow),
			and(eq(aSlot, vSlot), lt(aToken, vToken), eq(aScope, vScope)))),
	)
	// unfinished: not done, not failed, and no live claim (of another group: a complete-only
	// group makes none). A comparison with a missing attribute is false, so an item without a
	// status passes.
	unfinished = and(not(in(aStatus, vDone, vFailed)), not(and(eq(aStatus, vClaimed), gt(aClaimUntil, vNow))))
	// stateless: the item has no state at all (the scan saw none): implies claimable and
	// unfinished, and is cheaper for DynamoDB to evaluate.
	stateless = missing(aStatus)
	// seenState (the complete-only writes; the fresh one in a versioned ledger only): the item's
	// claim id is the one the caller saw with its state (or its own, when it saw none: only its
	// own earlier landing shows it), or it has none (an item never written, a state set by hand).
	// Every write that claims an item, finishes it without a claim, reopens or redrives it sets a
	// new claim id (a claim's own later writes keep the claim's), so a state gained or a version
	// finished and reopened since the caller read the item shows another one. Unversioned ledgers
	// need it too: a versioned group of the same job may reopen an item (OpRenew) that a group
	// without versions read before, and that group's run must not finish the reopened item with
	// the content another run finished before (its effects would commit twice).
	seenState = or(missing(aClaim), eq(aClaim, vPrev))
)

// notMine adds to c that the item does not show the caller's own write (its id): a failure
// record whose answer was lost, sent again, is refused instead of counting the attempt twice. A
// comparison with a missing claim is false, so an item never written by a claim passes.
func notMine(c cond) cond { return and(c, not(eq(aClaim, vClaim))) }

// machine returns every transition for a ledger of shape s.
func machine(s shape) map[Op]transition {
	guard := func(c cond) cond {
		if s.mustExist {
			return and(present(aExists), c)
		}
		return c
	}
	claimer := []setTo{set(aStatus, vClaimed), set(aOwner, vOwner), set(aSlot, vSlot), set(aToken, vToken),
		set(aScope, vScope), set(aClaim, vClaim), set(aClaimUntil, vUntil)}
	who := []setTo{set(aOwner, vOwner), set(aSlot, vSlot), set(aToken, vToken), set(aClaim, vClaim), set(aError, vError)}
	countAttempt := []addTo{{aAttempts, vOne}}
	done := update{set: []setTo{set(aStatus, vDone), set(aDoneAt, vNow)}, remove: s.removeOnDone}
	dead := update{set: []setTo{set(aStatus, vFailed), set(aError, vError), set(aFailedAt, vNow)}, remove: s.removeOnDone}
	completeOnly := update{set: []setTo{set(aStatus, vDone), set(aDoneAt, vNow), set(aClaim, vClaim)}, remove: s.removeOnDone}
	if s.audit {
		completeOnly = completeOnly.with(update{set: []setTo{set(aOwner, vOwner), set(aSlot, vSlot), set(aToken, vToken)}, add: countAttempt})
	}
	ident := update{set: s.ident}
	t := map[Op]transition{
		OpClaimFresh: {cond: guard(stateless), upd: update{set: append(claimer, set(aAttempts, vOne))}.with(ident)},
		OpClaim:      {cond: guard(claimable), upd: update{set: claimer, add: countAttempt}.with(ident)},
		OpComplete:   {cond: fenced, upd: done},
		OpRetry:      {cond: fenced, upd: update{set: []setTo{set(aStatus, vRetry), set(aRetryAt, vRetryAt), set(aError, vError)}}},
		OpDeadLetter: {cond: fenced, upd: dead},
		OpRelease:    {cond: fenced, upd: update{set: []setTo{set(aStatus, vRetry), set(aRetryAt, vNow)}, add: []addTo{{aAttempts, vMinusOne}}}},
		OpAbandon:    {cond: fenced, upd: update{remove: []attr{aScope}}},

		OpCompleteOnlyFresh: {cond: guard(stateless), upd: completeOnly.with(ident)},
		OpCompleteOnly:      {cond: guard(and(unfinished, seenState)), upd: completeOnly.with(ident)},
		OpFailOnly: {cond: guard(and(notMine(unfinished), seenState)), upd: update{
			set: append([]setTo{set(aStatus, vRetry), set(aRetryAt, vRetryAt)}, who...), remove: []attr{aClaimUntil}, add: countAttempt,
		}.with(ident)},
		OpFailOnlyDead: {cond: guard(and(notMine(unfinished), seenState)), upd: update{
			set: append([]setTo{set(aStatus, vFailed), set(aFailedAt, vNow)}, who...), remove: append([]attr{aClaimUntil, aRetryAt}, s.removeOnDone...), add: countAttempt,
		}.with(ident)},
		OpExhausted: {cond: and(eq(aStatus, vRetry), eq(aClaim, vClaim)), upd: dead},
		// A redrive leaves no state but a new claim id, so that a complete-only write prepared
		// before the item failed does not land on it (seenState: a fresh write only in a versioned
		// ledger; the redrive tool cannot know whether the group's ledger is one).
		OpRedrive: {cond: eq(aStatus, vFailed), upd: update{
			set:    []setTo{{a: aLastError, v: vNone, from: aError}, set(aRedriven, vNow), set(aClaim, vClaim)},
			remove: []attr{aStatus, aError, aAttempts, aFailedAt, aOwner, aSlot, aToken, aScope, aClaimUntil, aRetryAt},
		}},
	}
	versions(s, t)
	for op, tr := range t {
		tr.op = op
		t[op] = tr
	}
	return t
}

// finishing are the transitions that move an item to done or failed.
var finishing = []Op{OpComplete, OpDeadLetter, OpCompleteOnlyFresh, OpCompleteOnly, OpFailOnlyDead, OpExhausted}

// versions adds to t what a versioned ledger writes: every finishing write records the version
// its caller handled, and OpRenew reopens a finished item for a new version. A renew is
// conditioned on the claim id the caller read with the finished state: every write that changes
// the state sets a new claim id, so the renew lands only on the very state the caller saw, and a
// version handled meanwhile is not renewed.
//
// The complete-only writes, which no claim fences, are conditioned the same way (seenState, which
// every ledger's general complete-only writes carry; here the fresh one too): a handler run for a
// version that another worker finished meanwhile, and that was reopened for a newer version since,
// would otherwise finish the newer version with the older one's run (and commit its effects a
// second time), or count its failure against it.
func versions(s shape, t map[Op]transition) {
	if !s.versioned {
		return
	}
	for _, op := range finishing {
		tr := t[op]
		tr.upd = tr.upd.with(update{set: []setTo{set(aVersion, vVersion)}})
		t[op] = tr
	}
	tr := t[OpCompleteOnlyFresh]
	tr.cond = and(tr.cond, seenState)
	t[OpCompleteOnlyFresh] = tr
	t[OpRenew] = transition{
		cond: and(in(aStatus, vDone, vFailed), eq(aClaim, vPrev)),
		upd: update{
			set:    []setTo{set(aStatus, vRetry), set(aRetryAt, vNow), set(aAttempts, vZero), set(aClaim, vClaim)},
			remove: []attr{aError, aFailedAt},
		},
	}
}
