package worker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file gives complete-only mode the retry and dead-letter accounting of claim mode. A
// complete-only item has no claim, so a failed attempt is recorded by one conditional write that
// holds while the item is neither done nor failed: it counts the attempt and marks the item retry
// (with retry_at and the error), or failed at once for a Permanent error. When the count reaches
// MaxAttempts a second write, fenced on that count, moves the item to failed. (A lost answer
// whose repeat lands again may count one attempt twice; the item then fails one attempt early.)

// completeOnlyFailer records failed complete-only attempts; both ledgers are.
type completeOnlyFailer interface {
	failOnly(ctx context.Context, r ClaimRequest, f onlyFailure) (Status, error)
}

// onlyFailure is one failed complete-only attempt.
type onlyFailure struct {
	errText     string
	retryAt     time.Time
	permanent   bool
	maxAttempts int
}

// failOnly records f and returns the item's status after it: retry, failed, or (when the item was
// finished already) the state found.
func (l *ledgerCore) failOnly(ctx context.Context, r ClaimRequest, f onlyFailure) (Status, error) {
	rowKey, err := l.row.key(r.Key)
	if err != nil {
		return "", err
	}
	rm := ""
	for i := range l.row.removeOnDone {
		rm += ", #rm" + strconv.Itoa(i)
	}
	who := "#owner = :owner, #slot = :slot, #token = :token, #error = :error" + l.row.claimSet
	update := "SET #status = :retry, #retryAt = :retryAt, " + who + " REMOVE #claimUntil ADD #attempts :one"
	if f.permanent {
		update = "SET #status = :failed, #failedAt = :now, " + who + " REMOVE #claimUntil, #retryAt" + rm + " ADD #attempts :one"
	}
	vals := l.claimRequestVals(r)
	vals[":retryAt"] = ledgerMillis(f.retryAt)
	vals[":error"] = ledgerS(truncateErrorText(f.errText))
	names, used := l.exprInput(vals, l.x.completeOnlyCond, update)
	out, err := l.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(l.x.completeOnlyCond), UpdateExpression: aws.String(update),
		ExpressionAttributeNames: names, ExpressionAttributeValues: used,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return l.decodeState(ccf.Item).Status, nil
	}
	if err != nil {
		return "", l.wrapErr("record failure", l.row.table, err)
	}
	st := l.decodeState(out.Attributes)
	if f.permanent || st.Attempts < f.maxAttempts {
		return st.Status, nil
	}
	c := Claim{Key: r.Key, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Attempt: st.Attempts}
	if err := l.failRetried(ctx, rowKey, c, f.errText, r.Now); err != nil {
		return StatusRetry, err
	}
	return StatusFailed, nil
}

// failRetried moves an item in retry, as the failure write c left it, to failed.
func (l *ledgerCore) failRetried(ctx context.Context, rowKey Key, c Claim, errText string, now time.Time) error {
	vals := fenceVals(c)
	vals[":retry"] = ledgerS(string(StatusRetry))
	vals[":failed"] = ledgerS(string(StatusFailed))
	vals[":now"] = ledgerMillis(now)
	vals[":error"] = ledgerS(truncateErrorText(errText))
	cond := "#status = :retry AND #owner = :owner AND #slot = :slot AND #token = :token AND #attempts = :attempt"
	return l.updateIf(ctx, "dead-letter", rowKey, cond, l.x.deadUpdate, vals)
}

// completeOnlyFailed records a complete-only handler's error like claim mode does: a retry with
// backoff, or a dead letter (Permanent, or MaxAttempts reached). A write of unknown outcome keeps
// the item for a later pass.
func (p *pass) completeOnlyFailed(ctx context.Context, t task, herr error, took time.Duration) {
	c := p.w.cfg
	slot := p.lease.Slot()
	permanent, after := classify(herr)
	if after <= 0 {
		after = c.RetryBackoff
	}
	now := c.Clock.Now()
	at := now.Add(after)
	fo, ok := p.e.ledger.(completeOnlyFailer)
	if !ok {
		p.again(at)
		return
	}
	st, err := fo.failOnly(ctx, p.claimRequest(t.key, now, now),
		onlyFailure{errText: herr.Error(), retryAt: at, permanent: permanent, maxAttempts: c.MaxAttempts})
	switch {
	case err != nil:
		c.Logger.Error("dynapart: record a failed attempt (complete-only); the item will be tried again", "slot", slot, "err", err)
		p.again(at)
	case st == StatusRetry:
		p.w.stats.retried.Add(1)
		p.w.itemEvent(OutcomeRetried, t.key, slot, 0, took)
		p.again(at)
	case st == StatusFailed:
		p.deadLettered(ctx, t.key, slot, 0, took)
		c.Logger.Warn("dynapart: item dead-lettered (complete-only)", "slot", slot, "key", keyText(t.key))
	default:
		p.w.stats.skipped.Add(1) // finished elsewhere meanwhile
		p.w.itemEvent(OutcomeSkipped, t.key, slot, 0, took)
	}
}
