package lock

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Fenced writes: every write through a held lease (checkpoint, finished, release) is conditioned on
// the owner and token the lease was acquired with, and none is sent once the lease has ended.

const fencedCondition = "#owner = :me AND #token = :myToken AND #rel = :false"

func fencedNames(m map[string]string) map[string]string {
	m["#owner"], m["#token"], m["#rel"] = attrOwner, attrToken, attrReleased
	return m
}

func (l *Lease) fencedValues(m map[string]types.AttributeValue) map[string]types.AttributeValue {
	m[":me"], m[":myToken"], m[":false"] = avS(l.c.owner), avN(l.token), avB(false)
	return m
}

// fencedWrite applies update to the lease's item only while it is still ours (owner, token, not
// released). A lease whose context is done (lost, expired by the holder's clock, released) writes
// nothing: it returns an error wrapping ErrLeaseLost without a request, since the slot may belong
// to someone else by now. A failed condition means we lost it: the context is cancelled and
// ErrLeaseLost returned; the item is unchanged.
func (l *Lease) fencedWrite(ctx context.Context, what, update string, names map[string]string, values map[string]types.AttributeValue) error {
	if err := l.ended(what); err != nil {
		return err
	}
	_, err := l.c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(l.c.table),
		Key:                                 key(l.pk, l.slot),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(fencedCondition),
		ExpressionAttributeNames:            fencedNames(names),
		ExpressionAttributeValues:           l.fencedValues(values),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	if cf, ok := conditionFailed(err); ok {
		cur := decodeSlot(cf.Item)
		lerr := l.lost("%s found owner %q token %d released %t", what, cur.owner, cur.token, cur.released)
		l.end(lerr)
		return lerr
	}
	return fmt.Errorf("lock: %s %s slot %d: %w", what, l.group, l.slot, l.c.tableErr(err))
}

// ended is nil while the lease may still write; once it is released, lost or expired by the
// holder's clock, it is the error (wrapping ErrLeaseLost) of a write what refused without a request.
func (l *Lease) ended(what string) error {
	if l.released() {
		return fmt.Errorf("lock: %s: %w (%w)", what, ErrLeaseLost, ErrReleased)
	}
	if l.ctx.Err() != nil {
		return l.endedErr(what)
	}
	return nil
}

// endedErr is the error of a write refused because the lease's context is done: its cause, which
// wraps ErrLeaseLost (or is ErrReleased, then wrapped in ErrLeaseLost too).
func (l *Lease) endedErr(what string) error {
	cause := context.Cause(l.ctx)
	if errors.Is(cause, ErrLeaseLost) {
		return fmt.Errorf("lock: %s: %w", what, cause)
	}
	return fmt.Errorf("lock: %s: %w (%w)", what, ErrLeaseLost, cause)
}

func (l *Lease) released() bool {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	return l.relDone
}

// SaveCheckpoint stores value on the slot, fenced on owner and token: a stale holder gets
// ErrLeaseLost and changes nothing. The next holder of the slot sees it as Checkpoint().
func (l *Lease) SaveCheckpoint(ctx context.Context, value string) error {
	return l.fencedWrite(ctx, "save checkpoint", "SET #cp = :cp",
		map[string]string{"#cp": attrCheckpoint}, map[string]types.AttributeValue{":cp": avS(value)})
}

// MarkFinished marks the slot's share done (fenced): the slot is not handed out again under the
// plan epoch the lease was acquired under ([Lease.Epoch]) until ResetGroup, and once every slot
// 0..n-1 is finished under the group's current epoch AcquireSlot returns ErrGroupFinished. A
// ResizeGroup re-opens every slot: a slot finished under an older epoch is free to take.
func (l *Lease) MarkFinished(ctx context.Context) error {
	return l.fencedWrite(ctx, "mark finished", "SET #fin = :true",
		map[string]string{"#fin": attrFinished}, map[string]types.AttributeValue{":true": avB(true)})
}

// FinishWithCheckpoint is MarkFinished that also stores value as the slot's checkpoint (as
// SaveCheckpoint does), in the same fenced write: the last checkpoint of a share and its end cost
// one round trip.
func (l *Lease) FinishWithCheckpoint(ctx context.Context, value string) error {
	return l.fencedWrite(ctx, "mark finished", "SET #cp = :cp, #fin = :true",
		map[string]string{"#cp": attrCheckpoint, "#fin": attrFinished},
		map[string]types.AttributeValue{":cp": avS(value), ":true": avB(true)})
}

// FinishAndRelease is MarkFinished, SaveCheckpoint(value) and Release in one write, for a holder
// that is done with the slot: one round trip where the three take three. A lease already lost or
// released writes nothing (an error wrapping ErrLeaseLost, as MarkFinished). After a transport
// error, a later Release (or FinishAndRelease, whose value is then ignored) sends the same write
// again, conditioned like Release on owner and token only: a takeover or reset since fails it.
func (l *Lease) FinishAndRelease(ctx context.Context, value string) error {
	l.relMu.Lock()
	if !l.relDone && l.ctx.Err() == nil {
		l.relFinish = &value
	}
	retry := !l.relDone && l.relFinish != nil // set now, or by a call whose write failed
	l.relMu.Unlock()
	if !retry {
		return l.endedErr("mark finished")
	}
	return l.Release(ctx)
}

// Release gives the slot back at once (released = true, fenced) so a standby can take it without
// waiting for expiry. It stops the heartbeat and waits for it, and cancels the context with
// ErrReleased before the write, so no work continues while the next holder starts. It is
// idempotent; it returns an error wrapping ErrLeaseLost when the lease had already been lost.
// After a transport error it may be called again.
func (l *Lease) Release(ctx context.Context) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.relDone {
		return l.relErr
	}
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.hbDone
	var wasLost error
	if l.ctx.Err() != nil && !errors.Is(context.Cause(l.ctx), ErrReleased) {
		wasLost = context.Cause(l.ctx)
	}
	if wasLost != nil {
		l.relFinish = nil // a lost lease finishes nothing
	}
	l.end(ErrReleased)
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(l.c.table),
		Key:                                 key(l.pk, l.slot),
		UpdateExpression:                    aws.String("SET #rel = :true"),
		ConditionExpression:                 aws.String("#owner = :me AND #token = :myToken"),
		ExpressionAttributeNames:            map[string]string{"#owner": attrOwner, "#token": attrToken, "#rel": attrReleased},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":me": avS(l.c.owner), ":myToken": avN(l.token), ":true": avB(true)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if cp := l.relFinish; cp != nil {
		in.UpdateExpression = aws.String("SET #rel = :true, #fin = :true, #cp = :cp")
		in.ExpressionAttributeNames["#fin"], in.ExpressionAttributeNames["#cp"] = attrFinished, attrCheckpoint
		in.ExpressionAttributeValues[":cp"] = avS(*cp)
	}
	_, err := l.c.db.UpdateItem(ctx, in)
	switch cf, ok := conditionFailed(err); {
	case err == nil:
		l.relErr = wasLost
	case ok:
		cur := decodeSlot(cf.Item)
		l.relErr = l.lost("release found owner %q token %d", cur.owner, cur.token)
	default:
		return fmt.Errorf("lock: release %s slot %d: %w", l.group, l.slot, l.c.tableErr(err))
	}
	l.relDone = true
	l.c.log.Info("lock: released", "pk", l.pk, "slot", l.slot, "token", l.token, "err", l.relErr)
	return l.relErr
}
