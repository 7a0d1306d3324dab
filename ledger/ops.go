package ledger

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ops is what the two ledgers share: the transitions, written by their core. Both Inline and
// Table embed it.
type ops struct {
	core *core
}

// Claim implements Ledger.
func (l ops) Claim(ctx context.Context, reqs []ClaimRequest) ([]ClaimOutcome, error) {
	return l.core.claim(ctx, reqs)
}

// Complete implements Ledger.
func (l ops) Complete(ctx context.Context, c Claim, now time.Time) error {
	return l.core.complete(ctx, c, now)
}

// CompleteWith implements Ledger.
func (l ops) CompleteWith(ctx context.Context, c Claim, now time.Time, eff *Effects) error {
	return l.core.completeWith(ctx, c, now, eff)
}

// CompleteOnlyWith implements Ledger.
func (l ops) CompleteOnlyWith(ctx context.Context, req ClaimRequest, eff *Effects) (Result, error) {
	return l.core.completeOnlyWith(ctx, req, eff)
}

// CompleteBatch implements Ledger.
func (l ops) CompleteBatch(ctx context.Context, claims []Claim, now time.Time) []error {
	return l.core.completeBatch(ctx, claims, now)
}

// CompleteOnly implements Ledger.
func (l ops) CompleteOnly(ctx context.Context, req ClaimRequest) (Result, error) {
	return l.core.completeOnly(ctx, req)
}

// FailOnly implements Ledger.
func (l ops) FailOnly(ctx context.Context, req ClaimRequest, f Failure) (Result, error) {
	return l.core.failOnly(ctx, req, f)
}

// Retry implements Ledger.
func (l ops) Retry(ctx context.Context, c Claim, errText string, retryAt time.Time) error {
	return l.core.retry(ctx, c, errText, retryAt)
}

// DeadLetter implements Ledger.
func (l ops) DeadLetter(ctx context.Context, c Claim, errText string, now time.Time) error {
	return l.core.deadLetter(ctx, c, errText, now)
}

// Release implements Ledger.
func (l ops) Release(ctx context.Context, c Claim, now time.Time) error {
	return l.core.release(ctx, c, now)
}

// Abandon implements Ledger.
func (l ops) Abandon(ctx context.Context, c Claim) error { return l.core.abandon(ctx, c) }

// Redrive implements Ledger.
func (l ops) Redrive(ctx context.Context, key Key, now time.Time) (bool, error) {
	return l.core.redrive(ctx, key, now)
}

// State implements Ledger. An item without state (for the inline ledger also one that does not
// exist; for the table ledger one without a row) reads as pending.
func (l ops) State(ctx context.Context, key Key) (ItemState, error) {
	return l.core.state(ctx, key)
}

// Allows implements Ledger: op's condition, evaluated on st as read, with req's values.
func (l ops) Allows(op Op, st ItemState, req ClaimRequest) bool {
	c, ok := l.core.ops[op]
	if !ok {
		return false
	}
	return c.cond.holds(l.core.view(l.core.encodeState(st), l.core.requestVals(req)))
}

// ConsumedWCU implements Ledger: the write capacity the ledger's writes consumed, as DynamoDB
// reported it: for every write while a write rate is held, otherwise estimated from one write in
// 16 (see capacityMeter).
func (l ops) ConsumedWCU() float64 { return l.core.consumedWCU() }

// ConsumedRCU implements Ledger.
func (l ops) ConsumedRCU() float64 { return l.core.reads.total() }

// ConditionFailures implements Ledger: the ledger's writes whose condition failed (items taken
// or finished by someone else, stale claims).
func (l ops) ConditionFailures() int64 { return l.core.condFailures.Load() }

// stateOnItem decodes the state a scanned item carries (the inline ledger's).
func (l ops) stateOnItem(item map[string]types.AttributeValue) ItemState {
	return l.core.decodeState(item)
}
