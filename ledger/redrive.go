package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// Redrive moves dead letters back to pending: the state a worker claims again on its next pass.
//
// Each move is one conditional write (OpRedrive), made only while the item is still failed, so a
// redrive racing a worker or another redrive never touches an item that moved on. The move removes
// the status, the attempt count, the claim fields and the failure time, writes a new claim id (so
// that a complete-only write prepared before the item failed does not land on it: see
// ClaimRequest.Seen), and keeps the last error
// for history in <prefix>last_error (inline ledger; "last_error" on a table ledger row) with the
// time of the redrive in <prefix>redriven_at (unix ms).
//
// In index mode the dead-lettered item left the pending index (its shard attribute was removed);
// a redriven item is picked up by a filter- or segment-mode pass, not by the index.
//
// With keys, only those are moved; every key is checked before anything is written (l.State reads
// it), and a key that is not failed is counted in NotFailed. With no keys, every dead letter of the
// ledger is moved. now is the time recorded as the redrive's. A move that fails, or ctx ending
// during the moves, stops the redrive with a *RedriveError naming the key and how many keys were
// left (ctx ending before, while the dead letters are read, is the read's error).
func Redrive(ctx context.Context, l Ledger, keys []Key, now time.Time) (RedriveResult, error) {
	var res RedriveResult
	move := func(k Key) error {
		moved, err := l.Redrive(ctx, k, now)
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
	if len(keys) == 0 {
		// All dead letters: collect first, so the writes do not race the scan that finds them.
		if err := l.DeadLetters(ctx, func(d DeadLetter) error { keys = append(keys, d.Key); return nil }); err != nil {
			return res, err
		}
	} else if err := checkKeys(l, keys); err != nil {
		return res, err
	}
	ctx = inTurn(ctx) // one item that transactions keep busy does not hold the others up
	for i, k := range keys {
		if err := move(k); err != nil {
			return res, &RedriveError{Key: k, Left: len(keys) - i - 1, Interrupted: ctx.Err() != nil, Err: err}
		}
	}
	return res, nil
}

// RedriveError is a redrive that stopped at a key whose move failed (after the SDK's retries), or
// whose context ended (Interrupted): the moves before it stand, counted in the result; the keys
// after it were not tried. The key's own move may have landed if only its answer was lost
// (RedriveResult.Moved does not count it then). A redrive is safe to run again: it moves what is
// failed when it runs.
type RedriveError struct {
	Key         Key  // the key whose move failed
	Left        int  // keys after it, not tried
	Interrupted bool // the redrive's context ended (not a timeout of DynamoDB's answer)
	Err         error
}

func (e *RedriveError) Error() string { return "dynapart: " + e.Describe(KeyText(e.Key)) }

// Describe is the error's text with the key spelled as the caller spells keys: where the redrive
// stopped ("interrupted" when its context ended), why, how many keys were left, and what running
// it again does.
func (e *RedriveError) Describe(key string) string {
	left := fmt.Sprintf("%d keys", e.Left)
	if e.Left == 1 {
		left = "1 key"
	}
	switch {
	case e.Interrupted:
		return fmt.Sprintf("redrive interrupted at item %s (%v); %s after it not tried. %s", key, e.Err, left, redriveAgain)
	case IsValidation(e.Err):
		return fmt.Sprintf("redrive stopped at item %s: %v; %s after it not tried. DynamoDB refuses this item's move, "+
			"so a redrive of it stops here again: to leave it out, redrive the other keys by name", key, e.Err, left)
	}
	return fmt.Sprintf("redrive stopped at item %s: %v; %s after it not tried. %s", key, e.Err, left, redriveAgain)
}

// redriveAgain is what running a stopped redrive again does.
const redriveAgain = "Running the redrive again is safe: it moves what is failed then, this item too if its move did not land"

func (e *RedriveError) Unwrap() error { return e.Err }

// keyChecker is a ledger that can check an item key without writing: both of this package's.
type keyChecker interface{ checkKey(Key) error }

// checkKeys checks every key before anything is written: a malformed key writes nothing at all.
func checkKeys(l Ledger, keys []Key) error {
	kc, ok := l.(keyChecker)
	if !ok {
		return nil
	}
	for _, k := range keys {
		if err := kc.checkKey(k); err != nil {
			return err
		}
	}
	return nil
}

func (l ops) checkKey(k Key) error {
	_, err := l.core.row.key(k)
	return err
}

// redrive moves one item from failed to pending; false when it was not failed.
func (l *core) redrive(ctx context.Context, key Key, now time.Time) (bool, error) {
	rowKey, err := l.row.key(key)
	if err != nil {
		return false, err
	}
	_, err = l.update(ctx, l.input(OpRedrive, rowKey, values{vNow: attrMillis(now), vClaim: attrS(newID())}))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, l.wrapErr("redrive", l.row.table, err)
	}
	return true, nil
}
