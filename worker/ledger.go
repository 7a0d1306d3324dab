package worker

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The ledger holds each item's processing state. Every transition is one conditional write:
//
//	pending (no state) --claim--> claimed --complete--> done
//	                                  |----retry----> retry (pending again once retry_at has passed)
//	                                  |----dead-----> failed (dead letter, with the last error)
//	                                  '----release--> retry, retry_at = now, the attempt not counted
//
// A claim records the worker (owner), the slot and the slot's lease token it was made under, the
// token's scope (which group and lease table the token counts in), and the attempt number (+1 on
// every claim). A claim may be taken over when its claim TTL has passed, or at once by the holder
// of a newer lease token of the same slot in the same scope (a dead worker's in-flight items are
// reclaimed right after the takeover, with no wait and no clock). A claim without a scope (made
// before scopes were recorded) is taken over only when it expires. Complete, retry, dead-letter
// and release are conditioned on status = claimed AND owner AND token AND attempt of the caller's
// claim, so a stale worker can never finish an item that has been claimed again since.

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

// ErrClaimLost means the caller's claim is no longer current: the item was reclaimed by another
// worker (or a newer lease of the same slot), or it was finished already. Nothing was written.
var ErrClaimLost = errors.New("dynapart: claim lost")

// Key is an item's primary key attributes.
type Key = map[string]types.AttributeValue

// ClaimRequest asks the ledger to claim one item.
type ClaimRequest struct {
	Key   Key
	Owner string    // worker id
	Slot  int       // the slot the claim is made under
	Token int64     // the slot lease's fencing token
	Now   time.Time // the caller's clock, for retry_at and expired claims
	Until time.Time // the claim's expiry (Now + claim TTL)
	// Scope names what Token counts in (the worker sets a short hash of its lease table and
	// group). A live claim is taken over at once only by a larger token of the same slot and the
	// same scope; a claim of another scope (another group on the same table) waits for its expiry.
	Scope string
	// statusOnly makes CompleteOnly write only the status and done_at (and the table ledger's row
	// identity): not Owner, Slot and Token, and no attempt counted. Run sets it unless
	// Config.CompleteOnlyAudit; a request built elsewhere gets the full write.
	statusOnly bool
	// fresh says the scan saw the item with no state. The write then requires that it still has
	// none, a shorter condition (DynamoDB Local evaluates the general one at about three quarters
	// of the rate), and a batched claim learns its attempt (1) without reading it back. An item
	// that has gained a state since is written again under the general condition.
	fresh bool
}

// Claim is a claim held by the caller. Its fields fence every later write.
type Claim struct {
	Key     Key
	Owner   string
	Slot    int
	Token   int64
	Attempt int // 1 for the first claim of an item, +1 for every later claim
	Until   time.Time
}

// ClaimOutcome says what became of one ClaimRequest.
type ClaimOutcome struct {
	Claimed bool
	Claim   Claim  // set when Claimed
	Status  Status // when not claimed: the state that stopped the claim (done, failed, claimed, retry)
	// Err, when set, says the item cannot be claimed at all (it wraps ErrUnprocessable): DynamoDB
	// refused the write for this item in a batch, e.g. because the inline ledger's attributes would
	// push it past 400 KB. No retry can help. (A single claim reports this as Claim's error.)
	Err error
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
	Attempts   int
	ClaimUntil time.Time
	RetryAt    time.Time
	DoneAt     time.Time
	Error      string
}

// Ledger stores the per-item processing state. Two implementations pass one contract suite: the
// inline ledger (attributes on the item itself) and the table ledger (a separate table keyed by job
// and item key).
type Ledger interface {
	// Claim claims the items it can, batching up to 25 per TransactWriteItems. Items already
	// claimed, done, failed or waiting for a retry are reported, not errors; the outcomes are in
	// the order of reqs.
	Claim(ctx context.Context, reqs []ClaimRequest) ([]ClaimOutcome, error)
	// Complete moves a claimed item to done. ErrClaimLost when the claim is not current. Completing
	// again with the same claim returns nil (a retried request whose first answer was lost).
	Complete(ctx context.Context, c Claim, now time.Time) error
	// CompleteOnly moves an item to done without a claim, in one conditional write, unless it is
	// done already (then done = false). For handlers that are themselves one conditional write.
	// The built-in ledgers record req's Owner, Slot and Token and count the attempt, except for
	// Run's requests when Config.CompleteOnlyAudit is off: then only the status and done_at.
	CompleteOnly(ctx context.Context, req ClaimRequest) (done bool, err error)
	// Retry records a failed attempt: pending again at retryAt, with the error text.
	Retry(ctx context.Context, c Claim, errText string, retryAt time.Time) error
	// DeadLetter moves a claimed item to failed with the error text.
	DeadLetter(ctx context.Context, c Claim, errText string, now time.Time) error
	// Release gives a claim back without counting the attempt (shutdown): pending at once.
	Release(ctx context.Context, c Claim, now time.Time) error
	// State reads one item's state (consistent read).
	State(ctx context.Context, key Key) (ItemState, error)
	// Summarize counts all items of the source table by state.
	Summarize(ctx context.Context) (Summary, error)
	// DeadLetters calls fn for every failed item.
	DeadLetters(ctx context.Context, fn func(DeadLetter) error) error
}
