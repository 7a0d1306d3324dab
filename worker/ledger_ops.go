package worker

import (
	"context"
	"time"
)

// ledgerOps is what the two ledgers share: the transitions, written by their ledgerCore. Both
// InlineLedger and TableLedger embed it.
type ledgerOps struct {
	core *ledgerCore
}

// Claim implements Ledger.
func (l ledgerOps) Claim(ctx context.Context, reqs []ClaimRequest) ([]ClaimOutcome, error) {
	return l.core.claim(ctx, reqs)
}

// Complete implements Ledger.
func (l ledgerOps) Complete(ctx context.Context, c Claim, now time.Time) error {
	return l.core.complete(ctx, c, now)
}

// CompleteBatch implements BatchCompleter.
func (l ledgerOps) CompleteBatch(ctx context.Context, claims []Claim, now time.Time) []error {
	return l.core.completeBatch(ctx, claims, now)
}

// CompleteOnly implements Ledger.
func (l ledgerOps) CompleteOnly(ctx context.Context, req ClaimRequest) (bool, error) {
	return l.core.completeOnly(ctx, req)
}

// Retry implements Ledger.
func (l ledgerOps) Retry(ctx context.Context, c Claim, errText string, retryAt time.Time) error {
	return l.core.retry(ctx, c, errText, retryAt)
}

// DeadLetter implements Ledger.
func (l ledgerOps) DeadLetter(ctx context.Context, c Claim, errText string, now time.Time) error {
	return l.core.deadLetter(ctx, c, errText, now)
}

// Release implements Ledger.
func (l ledgerOps) Release(ctx context.Context, c Claim, now time.Time) error {
	return l.core.release(ctx, c, now)
}

// State implements Ledger. An item without state (for the inline ledger also one that does not
// exist; for the table ledger one without a row) reads as pending.
func (l ledgerOps) State(ctx context.Context, key Key) (ItemState, error) {
	return l.core.state(ctx, key)
}

// failOnly implements completeOnlyFailer.
func (l ledgerOps) failOnly(ctx context.Context, r ClaimRequest, f onlyFailure) (Status, error) {
	return l.core.failOnly(ctx, r, f)
}

// ConsumedWCU is the write capacity the ledger's writes consumed, as DynamoDB reported it: for
// every write while a write rate is held, otherwise estimated from one write in 16 (see
// capacityMeter).
func (l ledgerOps) ConsumedWCU() float64 { return l.core.consumedWCU() }

// ConditionFailures counts the ledger's writes whose condition failed (items taken or finished by
// someone else, stale claims).
func (l ledgerOps) ConditionFailures() int64 { return l.core.condFailures.Load() }

// useWriteGate sends the ledger's writes through g (see writeGate); a Worker calls it before the
// ledger's first write.
func (l ledgerOps) useWriteGate(g *writeGate) {
	l.core.gate = g
}
