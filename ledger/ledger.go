package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Status is an item's ledger state.
type Status string

// The ledger states. An item without state is pending.
const (
	StatusPending Status = ""        // no state written yet
	StatusClaimed Status = "claimed" // a worker holds it until ClaimUntil
	StatusRetry   Status = "retry"   // pending again once RetryAt has passed
	StatusDone    Status = "done"    // completed, exactly once
	StatusFailed  Status = "failed"  // dead-lettered after MaxAttempts or a Permanent error
)

// Finished reports a state no transition but redrive leaves: done or failed.
func (s Status) Finished() bool { return s == StatusDone || s == StatusFailed }

// ErrClaimLost means the caller's claim is no longer current: the item was reclaimed by another
// worker (or a newer lease of the same slot), finished, reset or deleted. Nothing was written. The
// error is a *ClaimLostError, which says what the item showed instead.
var ErrClaimLost = errors.New("dynapart: claim lost")

// ClaimLostError is ErrClaimLost with the state the write found.
type ClaimLostError struct {
	Op    Op
	Claim Claim
	// Found is the item's state when the write was refused; Found.Status is StatusPending for an
	// item whose state was removed, or that no longer exists.
	Found ItemState
	where string // ledger and table
}

func (e *ClaimLostError) Error() string {
	return fmt.Sprintf("%v: %s in %s (owner %s, slot %d, token %d, attempt %d): the item is %s",
		ErrClaimLost, e.Op, e.where, e.Claim.Owner, e.Claim.Slot, e.Claim.Token, e.Claim.Attempt, e.Found.describe())
}

// Is makes errors.Is(err, ErrClaimLost) hold.
func (e *ClaimLostError) Is(target error) bool { return target == ErrClaimLost }

// Key is an item's primary key attributes.
type Key = map[string]types.AttributeValue

// ClaimRequest asks the ledger to claim one item (or, for CompleteOnly and FailOnly, to write it
// without a claim).
type ClaimRequest struct {
	Key   Key
	Owner string    // worker id
	Slot  int       // the slot the claim is made under
	Token int64     // the slot lease's fencing token
	Now   time.Time // the caller's clock, for retry_at and expired claims
	// Until is when the claim's holder must be done with it, by its own clock (Now + claim TTL).
	// The ledger stores Until + its MaxClockSkew as the claim's expiry (see WithMaxClockSkew), so
	// no other worker whose clock is within that skew takes the item over before Until.
	Until time.Time
	// Scope names what Token counts in (the worker sets a short hash of its lease table and
	// group). A live claim is taken over at once only by a larger token of the same slot and the
	// same scope; a claim of another scope (another group on the same table) waits for its expiry.
	Scope string
	// Fresh says the scan saw the item with no state. The write then requires that it still has
	// none (OpClaimFresh, OpCompleteOnlyFresh), a shorter condition (DynamoDB Local evaluates the
	// general one at about three quarters of the rate), and the claim makes attempt 1. An item
	// that has gained a state since is claimed again under the general condition; a complete-only
	// write is refused (see Seen), and the caller looks at the item again.
	Fresh bool
	// ID identifies the claim (or a complete-only write): unique per request. The ledger makes
	// one when it is empty; a caller that repeats a request whose answer it lost sends the same.
	ID string
	// Version is the content version the caller handles (ContentVersion of the item as the
	// handler sees it, after the item's own effects): a versioned ledger records it with the
	// write that finishes the item. Claims carry it on to their Claim.
	Version string
	// Seen is the claim id of the state the caller judged the item by (ItemState.Claim as it read
	// it, or as its renew left it; "" when it saw none). The complete-only writes
	// (CompleteOnly, CompleteOnlyWith, FailOnly; the fresh ones only in a versioned ledger) land
	// only on an item that still shows that claim id (or none, when the caller saw none): a write
	// prepared for a version handled meanwhile by another worker, and reopened (Renew, by a
	// versioned group of the same job) or redriven since, does not finish the new version with the
	// old one's run, nor count its failure against it. The caller must have read the content it
	// handles no earlier than that state. Claims ignore it.
	Seen string
	// WantItem asks a single claim of the inline ledger to return the item as the claim left it
	// (ClaimOutcome.Item): the content as of the claim, which no later write of another worker's
	// can have handled. The table ledger's row is not the item: Item stays nil there, as for a
	// claim settled after a lost answer.
	WantItem bool
}

// Claim is a claim held by the caller. Its ID fences every later write.
type Claim struct {
	Key     Key
	ID      string // unique to this claim: Complete, Retry, DeadLetter, Release need it to be current
	Owner   string
	Slot    int
	Token   int64
	Attempt int // 1 for the first claim of an item, +1 for every later claim (a release gives one back)
	Until   time.Time
	// Version is the content version the holder handles; a versioned ledger records it when the
	// claim finishes the item (Complete, DeadLetter). The holder may change it before (effects
	// that change the item make a new one).
	Version string
}

// ClaimOutcome says what became of one ClaimRequest.
type ClaimOutcome struct {
	Claimed bool
	Claim   Claim // set when Claimed
	// Found, when not claimed, is the state that stopped the claim (done, failed, claimed, retry;
	// pending for an item that no longer exists).
	Found ItemState
	// Err, when set, says the item cannot be claimed at all (it wraps ErrUnprocessable): DynamoDB
	// refused the write for this item in a batch, e.g. because the inline ledger's attributes would
	// push it past 400 KB. No retry can help. (A single claim reports this as Claim's error.)
	Err error
	// Item is the item as the claim left it, when the request asked for it (WantItem) and the
	// ledger could give it; nil otherwise.
	Item map[string]types.AttributeValue
}

// Result is what a write without a claim (CompleteOnly, FailOnly) did.
type Result struct {
	// Applied: the write landed; the item is now Found.Status.
	Applied bool
	// Found is the item's state after the write when applied, else the state that refused it:
	// finished (done, failed), claimed by a live claim (of another group; due at its expiry), or
	// pending for an item that no longer exists.
	Found ItemState
}

// ErrUnprocessable means DynamoDB refused an item's claim as invalid (in a transaction, the
// cancellation reason ValidationError): the item cannot hold the ledger's state.
var ErrUnprocessable = errors.New("dynapart: item cannot be claimed (refused as invalid)")

// Summary counts items by state.
type Summary struct {
	Total   int64 `json:"total"`
	Done    int64 `json:"done"`
	Pending int64 `json:"pending"` // no state, or waiting for a retry
	Claimed int64 `json:"claimed"`
	Failed  int64 `json:"failed"`
	// Orphaned counts the table ledger's rows of the job whose item is no longer in the source
	// table (deleted since). They are not items: no other field counts them.
	Orphaned int64 `json:"orphaned,omitempty"`
}

// DeadLetter is a failed item with its last error.
type DeadLetter struct {
	Key      Key
	Attempts int
	Error    string
	At       time.Time
}

// ItemState is one item's ledger state, as stored.
type ItemState struct {
	Status     Status
	Owner      string
	Slot       int
	Token      int64
	Scope      string // of the claim's lease token, see ClaimRequest.Scope
	Claim      string // the id of the claim or complete-only write that last wrote the state
	Attempts   int
	ClaimUntil time.Time // while claimed: when another worker may take it over
	RetryAt    time.Time // while in retry: when it is due
	DoneAt     time.Time
	Error      string
	// Version is the content version the write that finished the item recorded (a versioned
	// ledger; see WithVersions), "" when none.
	Version string
}

// Due is when the item may next be written by a claim: a live claim's expiry, a retry's time; zero
// for any other state (now, or never for a finished item).
func (s ItemState) Due() time.Time {
	switch s.Status {
	case StatusClaimed:
		return s.ClaimUntil
	case StatusRetry:
		return s.RetryAt
	}
	return time.Time{}
}

func (s ItemState) describe() string {
	switch s.Status {
	case StatusPending:
		return "pending (no state, or gone)"
	case StatusClaimed:
		return fmt.Sprintf("claimed (owner %s, slot %d, token %d, attempt %d)", s.Owner, s.Slot, s.Token, s.Attempts)
	}
	return string(s.Status)
}

// Failure is one failed complete-only attempt (FailOnly).
type Failure struct {
	Error       string
	RetryAt     time.Time
	Permanent   bool // dead-letter at once
	MaxAttempts int  // dead-letter when the attempt count reaches it
}

// Ledger stores the per-item processing state. Two implementations pass one contract suite: the
// inline ledger (attributes on the item itself) and the table ledger (a separate table keyed by job
// and item key). Every method is one or more transitions of machine.go; see doc.go.
type Ledger interface {
	// Claim claims the items it can, batching up to BatchSize per request. Items already claimed,
	// done, failed or waiting for a retry are reported, not errors; the outcomes are in the order
	// of reqs.
	Claim(ctx context.Context, reqs []ClaimRequest) ([]ClaimOutcome, error)
	// Complete moves a claimed item to done. A *ClaimLostError when the claim is not current.
	// Completing again with the same claim returns nil (a retried request whose first answer was
	// lost).
	Complete(ctx context.Context, c Claim, now time.Time) error
	// CompleteWith completes a claimed item and applies eff in the same atomic write (see
	// Effects): exactly once, with the completion, or not at all. An *EffectError when an effect
	// is refused (nothing written); a *ClaimLostError as Complete. A claim commits once: a repeat
	// (after a lost answer) must carry the same effects and time, and returns nil without applying
	// anything again.
	CompleteWith(ctx context.Context, c Claim, now time.Time, eff *Effects) error
	// CompleteOnlyWith is CompleteOnly with effects, committed as CompleteWith commits them.
	CompleteOnlyWith(ctx context.Context, req ClaimRequest, eff *Effects) (Result, error)
	// CompleteBatch completes each claim (up to BatchSize per request, each fenced on its claim)
	// and returns one error per claim, as Complete.
	CompleteBatch(ctx context.Context, claims []Claim, now time.Time) []error
	// CompleteOnly moves an item to done without a claim, in one conditional write, unless it is
	// finished already or claimed by a live claim (of another group).
	CompleteOnly(ctx context.Context, req ClaimRequest) (Result, error)
	// FailOnly records a failed complete-only attempt: retry, or failed when permanent or the
	// attempts reach MaxAttempts.
	FailOnly(ctx context.Context, req ClaimRequest, f Failure) (Result, error)
	// Retry records a failed attempt: pending again at retryAt, with the error text.
	Retry(ctx context.Context, c Claim, errText string, retryAt time.Time) error
	// DeadLetter moves a claimed item to failed with the error text.
	DeadLetter(ctx context.Context, c Claim, errText string, now time.Time) error
	// Release gives a claim back without counting the attempt (its handler did not run or was
	// interrupted: a shutdown, a pause): pending at once, by every clock within MaxClockSkew (its
	// retry_at is now less the skew).
	Release(ctx context.Context, c Claim, now time.Time) error
	// Abandon keeps a claim whose handler was given up on (it may still be running) until it
	// expires: a newer lease token of the slot no longer takes it over at once.
	Abandon(ctx context.Context, c Claim) error
	// Redrive moves one failed item back to pending; false when it was not failed.
	Redrive(ctx context.Context, key Key, now time.Time) (bool, error)
	// State reads one item's state (consistent read).
	State(ctx context.Context, key Key) (ItemState, error)
	// States reads the state of scanned items: the inline ledger's is on the item, the table
	// ledger reads its rows (consistent, 100 to a request).
	States(ctx context.Context, items []map[string]types.AttributeValue) ([]ItemState, error)
	// StateOf is the state a scanned item carries; false for the table ledger (its state is not on
	// the item).
	StateOf(item map[string]types.AttributeValue) (ItemState, bool)
	// Allows reports whether op's condition holds for an item in state st with the values of req:
	// the client-side copy of the write's condition, to skip items without a write.
	Allows(op Op, st ItemState, req ClaimRequest) bool
	// ScanAttrs are the attributes a scan must read for StateOf (none for the table ledger).
	ScanAttrs() []string
	// LeaveIndex removes the pending index's shard attribute from a finished item of the source
	// table (if the item still exists).
	LeaveIndex(ctx context.Context, key Key, shardAttr string) error
	// Summarize counts all items of the source table by state.
	Summarize(ctx context.Context) (Summary, error)
	// DeadLetters calls fn for every failed item.
	DeadLetters(ctx context.Context, fn func(DeadLetter) error) error
	// ConsumedWCU is the write capacity the ledger's writes consumed.
	ConsumedWCU() float64
	// ConsumedRCU is the read capacity the ledger's reads of state rows consumed, as DynamoDB
	// reported it (at least 1 RCU per row read).
	ConsumedRCU() float64
	// ConditionFailures counts the ledger's writes whose condition failed.
	ConditionFailures() int64
	// ContentVersion is the version of an item's content (every attribute but the ledger's).
	ContentVersion(item map[string]types.AttributeValue) string
	// Renew reopens a finished item whose state the caller read (its claim id prev) for a new
	// version: retry, due now on every clock within the ledger's MaxClockSkew (stored as now less
	// the skew). It returns the claim id the renew wrote (the reopened state's ItemState.Claim,
	// for ClaimRequest.Seen), "" when the item was no longer in that state. A versioned ledger
	// only.
	Renew(ctx context.Context, key Key, prev string, now time.Time) (claim string, err error)
}
