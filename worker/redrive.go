package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RedriveResult counts what a redrive did.
type RedriveResult struct {
	// Moved is the number of items moved from failed to pending.
	Moved int `json:"moved"`
	// NotFailed is the number of keys given that were not failed (pending, claimed, done, or
	// missing): a no-op, nothing written for them.
	NotFailed int `json:"not_failed"`
}

// ErrRedriveLedger means Redrive was given a Ledger it cannot write: only the ledgers of this
// package (InlineLedger, TableLedger) are supported.
var ErrRedriveLedger = errors.New("dynapart: redrive: unsupported ledger")

// Redrive moves dead letters back to pending: the state a worker claims again on its next pass.
//
// Each move is one conditional write, made only while the item is still failed, so a redrive
// racing a worker or another redrive never touches an item that moved on. The move removes the
// status, the attempt count, the claim fields and the failure time, and keeps the last error for
// history in <prefix>last_error (inline ledger; "last_error" on a table ledger row) with the time
// of the redrive in <prefix>redriven_at (unix ms).
//
// In index mode the dead-lettered item left the pending index (its shard attribute was removed);
// a redriven item is picked up by a filter- or segment-mode pass, not by the index.
//
// With keys, only those are moved; every key is checked before anything is written, and a key
// that is not failed is counted in NotFailed. With no keys, every dead letter of the ledger is
// moved. now is the time recorded as the redrive's. l must be an *InlineLedger or a *TableLedger
// (else ErrRedriveLedger).
func Redrive(ctx context.Context, l Ledger, keys []Key, now time.Time) (RedriveResult, error) {
	core, err := redriveCore(l)
	if err != nil {
		return RedriveResult{}, err
	}
	// Check every key before writing anything: a malformed key writes nothing at all.
	for _, k := range keys {
		if _, err := core.row.key(k); err != nil {
			return RedriveResult{}, err
		}
	}
	var res RedriveResult
	move := func(k Key) error {
		moved, err := core.redriveOne(ctx, k, now)
		if err != nil {
			return err
		}
		if moved {
			res.Moved++
		} else {
			res.NotFailed++
		}
		return nil
	}
	if len(keys) > 0 {
		for _, k := range keys {
			if err := move(k); err != nil {
				return res, err
			}
		}
		return res, nil
	}
	// All dead letters: collect first, so the writes do not race the scan that finds them.
	var all []Key
	if err := l.DeadLetters(ctx, func(d DeadLetter) error { all = append(all, d.Key); return nil }); err != nil {
		return res, err
	}
	for _, k := range all {
		if err := move(k); err != nil {
			return res, err
		}
	}
	return res, nil
}

func redriveCore(l Ledger) (*ledgerCore, error) {
	switch v := l.(type) {
	case *InlineLedger:
		return v.core, nil
	case *TableLedger:
		return v.core, nil
	}
	return nil, fmt.Errorf("%w: %T", ErrRedriveLedger, l)
}

// redriveOne moves one item from failed to pending; false when it was not failed.
func (l *ledgerCore) redriveOne(ctx context.Context, key Key, now time.Time) (bool, error) {
	rowKey, err := l.row.key(key)
	if err != nil {
		return false, err
	}
	a := l.attrs
	_, err = l.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String("#status = :failed"),
		UpdateExpression: aws.String("SET #lastError = if_not_exists(#error, :none), #redrivenAt = :now" +
			" REMOVE #status, #error, #attempts, #failedAt, #owner, #slot, #token, #claimUntil, #retryAt"),
		ExpressionAttributeNames: map[string]string{
			"#status": a.status, "#error": a.error, "#attempts": a.attempts, "#failedAt": a.failedAt,
			"#owner": a.owner, "#slot": a.slot, "#token": a.token, "#claimUntil": a.claimUntil, "#retryAt": a.retryAt,
			"#lastError": a.prefix() + "last_error", "#redrivenAt": a.prefix() + "redriven_at",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":failed": ledgerS(string(StatusFailed)), ":now": ledgerMillis(now), ":none": ledgerS(""),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, l.wrapErr("redrive", l.row.table, err)
	}
	return true, nil
}

// prefix is the prefix the state attribute names were made with (see newStateAttrs).
func (a stateAttrs) prefix() string { return strings.TrimSuffix(a.status, "status") }
