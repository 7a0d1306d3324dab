package worker

import (
	"context"
	"time"

	"github.com/dynapart/dynapart/ledger"
)

// The item state machine and both ledgers live in package ledger. These aliases keep code written
// against worker's names compiling for one release; new code should use package ledger.

type (
	// Ledger is ledger.Ledger.
	Ledger = ledger.Ledger
	// Status is ledger.Status.
	Status = ledger.Status
	// Key is ledger.Key.
	Key = ledger.Key
	// ClaimRequest is ledger.ClaimRequest.
	ClaimRequest = ledger.ClaimRequest
	// Claim is ledger.Claim.
	Claim = ledger.Claim
	// ClaimOutcome is ledger.ClaimOutcome.
	ClaimOutcome = ledger.ClaimOutcome
	// ItemState is ledger.ItemState.
	ItemState = ledger.ItemState
	// Summary is ledger.Summary.
	Summary = ledger.Summary
	// DeadLetter is ledger.DeadLetter.
	DeadLetter = ledger.DeadLetter
	// RedriveResult is ledger.RedriveResult.
	RedriveResult = ledger.RedriveResult
	// RedriveError is ledger.RedriveError.
	RedriveError = ledger.RedriveError
	// InlineLedger is ledger.Inline.
	InlineLedger = ledger.Inline
	// TableLedger is ledger.Table.
	TableLedger = ledger.Table
	// LedgerClient is ledger.Client.
	LedgerClient = ledger.Client
	// LedgerTableClient is ledger.TableClient.
	LedgerTableClient = ledger.TableClient
)

// The ledger states (ledger.Status*).
const (
	StatusPending = ledger.StatusPending
	StatusClaimed = ledger.StatusClaimed
	StatusRetry   = ledger.StatusRetry
	StatusDone    = ledger.StatusDone
	StatusFailed  = ledger.StatusFailed
)

// DefaultAttrPrefix is ledger.DefaultAttrPrefix.
const DefaultAttrPrefix = ledger.DefaultAttrPrefix

// Errors of package ledger.
var (
	ErrClaimLost         = ledger.ErrClaimLost
	ErrUnprocessable     = ledger.ErrUnprocessable
	ErrLedgerTableSchema = ledger.ErrLedgerTableSchema
)

// InlineOptions configures NewInlineLedger.
type InlineOptions struct {
	// Prefix starts the name of every state attribute. Defaults to "dp_".
	Prefix string
	// RemoveOnDone are attributes removed when an item is done or dead-lettered.
	RemoveOnDone []string
}

// NewInlineLedger is ledger.NewInline with complete-only writes that record who completed an item
// (as this function's ledgers always did).
func NewInlineLedger(db LedgerClient, table string, keyAttrs []string, opts InlineOptions) (*InlineLedger, error) {
	return ledger.NewInline(db, table, keyAttrs, ledger.WithPrefix(opts.Prefix),
		ledger.WithRemoveOnDone(opts.RemoveOnDone...), ledger.WithCompleteOnlyAudit())
}

// NewTableLedger is ledger.NewTable with complete-only writes that record who completed an item.
func NewTableLedger(db LedgerClient, ledgerTable, job, sourceTable string, keyAttrs []string) (*TableLedger, error) {
	return ledger.NewTable(db, ledgerTable, job, sourceTable, keyAttrs, ledger.WithCompleteOnlyAudit())
}

// CreateLedgerTable is ledger.CreateLedgerTable.
func CreateLedgerTable(ctx context.Context, db LedgerTableClient, name string) error {
	return ledger.CreateLedgerTable(ctx, db, name)
}

// Redrive is ledger.Redrive.
func Redrive(ctx context.Context, l Ledger, keys []Key, now time.Time) (RedriveResult, error) {
	return ledger.Redrive(ctx, l, keys, now)
}
