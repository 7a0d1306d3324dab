package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/capacity"
)

// statementBatcher is the optional client call for PartiQL statement batches; a *dynamodb.Client
// has it. Without it, batched claims and completions go in transactions.
type statementBatcher interface {
	BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error)
}

// statementFailuresToFallBack: after this many statement batches in a row failed as a whole (not
// throttled), the ledger writes its batches as transactions from then on. moto's server answers
// our statements with an HTTP 500; a backend that refuses them as invalid falls back at once.
const statementFailuresToFallBack = 3

// stmtAnswer is what one statement of a batch said.
type stmtAnswer int

const (
	stmtDone    stmtAnswer = iota // the write landed
	stmtRefused                   // its condition failed (the answer may carry the old item)
	stmtInvalid                   // the item cannot take the write (too large, invalid)
	stmtAgain                     // throttled, conflicting with a transaction, or a server error: send again
	stmtDenied                    // IAM denies the statement (a policy without PartiQLUpdate/Insert)
	stmtFatal                     // the table is missing: the call fails
)

// answerOf classifies one statement's answer; backoff is set for answers that call for one.
func answerOf(r types.BatchStatementResponse) (a stmtAnswer, backoff bool) {
	if r.Error == nil {
		return stmtDone, false
	}
	switch r.Error.Code {
	case types.BatchStatementErrorCodeEnumConditionalCheckFailed:
		return stmtRefused, false
	case types.BatchStatementErrorCodeEnumValidationError, types.BatchStatementErrorCodeEnumItemCollectionSizeLimitExceeded:
		return stmtInvalid, false
	case types.BatchStatementErrorCodeEnumAccessDenied:
		return stmtDenied, false
	case types.BatchStatementErrorCodeEnumResourceNotFound:
		return stmtFatal, false
	case types.BatchStatementErrorCodeEnumInternalServerError, types.BatchStatementErrorCodeEnumDuplicateItem:
		// Outcome unknown: sent again, a write that landed fails its condition with an image that
		// shows the caller's own write, and is settled as such.
		return stmtAgain, false
	}
	return stmtAgain, true // throttling, a transaction conflict
}

// usesStatements reports whether batched writes go in statement batches.
func (l *core) usesStatements() bool { return !l.noStatements.Load() }

// freshClaimStatement is a fresh claim as a statement: an UPDATE of the inline ledger's item, or an
// INSERT of the table ledger's row (its first claim creates the row, which an UPDATE does not).
func (l *core) freshClaimStatement(rowKey Key, vals values) (types.BatchStatementRequest, bool) {
	if l.source != "" {
		return l.insert(OpClaimFresh, rowKey, vals)
	}
	return l.statement(OpClaimFresh, rowKey, vals)
}

// executeStatements sends one BatchExecuteStatement through the write gate (nothing once ctx's
// fence has ended). Each statement is billed as a single write: 1 WCU per item at least, also when
// its condition fails. The answers are in the order of stmts.
func (l *core) executeStatements(ctx context.Context, stmts []types.BatchStatementRequest) ([]types.BatchStatementResponse, error) {
	if fenceEnded(ctx) {
		return nil, fmt.Errorf("statement batch: %w (%w)", errFenceEnded, context.Cause(fenceOf(ctx)))
	}
	floor := float64(len(stmts))
	taken, err := l.gate.before(ctx, floor)
	if err != nil {
		return nil, err
	}
	var seen atomic.Int64
	in := &dynamodb.BatchExecuteStatementInput{Statements: stmts, ReturnConsumedCapacity: l.stmtMeter.ask(l.gate.holdsRate())}
	out, err := l.db.(statementBatcher).BatchExecuteStatement(ctx, in, l.gate.option(&seen)...)
	var c []types.ConsumedCapacity
	throttled := throttledAttempts(seen.Load(), err)
	charged := billed(floor, err) // a batch whose answer was lost is charged in full
	if err == nil {
		charged = 0
		if len(out.ConsumedCapacity) > 0 {
			c = out.ConsumedCapacity
		}
		for _, r := range out.Responses {
			if r.Error != nil && capacity.IsThrottleReason(string(r.Error.Code)) {
				throttled++
			}
			if statementBilled(r) {
				charged++
			}
		}
	}
	l.stmtMeter.settle(charged, c)
	l.gate.after(taken, max(sumWCU(c), charged), len(c) > 0, throttled)
	if err == nil && len(out.Responses) != len(stmts) {
		err = fmt.Errorf("statement batch: %d answers for %d statements", len(out.Responses), len(stmts))
	}
	l.statementsAnswered(err)
	if err != nil {
		return nil, err
	}
	return out.Responses, nil
}

// denied falls back to single writes and transactions for good: IAM denies the statements (a
// policy written before statement batches, without dynamodb:PartiQLUpdate and PartiQLInsert), where
// UpdateItem and TransactWriteItems are allowed.
func (l *core) denied() { l.noStatements.Store(true) }

// statementsAnswered counts statement batches that failed as a whole, and falls back to
// transactions after statementFailuresToFallBack of them in a row (at once when the backend refused
// the batch as invalid: it does not take our statements).
func (l *core) statementsAnswered(err error) {
	switch {
	case err == nil:
		l.stmtFailures.Store(0)
	case capacity.IsThrottle(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
	case IsValidation(err) || l.stmtFailures.Add(1) >= statementFailuresToFallBack:
		l.noStatements.Store(true)
	}
}

// statementBilled reports whether DynamoDB bills a statement so answered: one that wrote, or whose
// condition failed (or whose INSERT met a row); not one throttled, refused, conflicting or failed.
func statementBilled(r types.BatchStatementResponse) bool {
	if r.Error == nil {
		return true
	}
	switch r.Error.Code {
	case types.BatchStatementErrorCodeEnumConditionalCheckFailed, types.BatchStatementErrorCodeEnumDuplicateItem:
		return true
	}
	return false
}

// statementErr is the error a statement's answer carries, for a caller's error.
func statementErr(r types.BatchStatementResponse) error {
	return fmt.Errorf("%s: %s", r.Error.Code, aws.ToString(r.Error.Message))
}
