package lock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Resize is what ResizeGroup did: the group's slot count before (OldN) and after (NewN), and its
// plan epoch after (unchanged when Changed is false).
type Resize struct {
	OldN, NewN int
	Epoch      int64
	Changed    bool
}

// ResizeOption configures one ResizeGroup call.
type ResizeOption func(*resizeOpts)

type resizeOpts struct {
	pin func(GroupState) map[string]string
}

// WithResizeMeta records meta values the group's meta item lacks in the same conditional write as
// the resize: pin gets the group's state as the resize read it (before the change) and returns the
// keys to record; keys the meta item already has are left as they are. It is for a value implied
// by the plan being replaced that must stay fixed when n changes: dynapart's scale records the
// segment count of a group made before it was recorded (n x sub_segments) at its first resize.
func WithResizeMeta(pin func(GroupState) map[string]string) ResizeOption {
	return func(o *resizeOpts) { o.pin = pin }
}

// maxResizeAttempts bounds how often ResizeGroup reads the meta item and writes it again after
// losing a race to another writer of n or epoch.
const maxResizeAttempts = 5

// ResizeGroup sets the group's slot count to m and moves its plan epoch on by one, in one
// conditional UpdateItem of the meta item that requires the n and epoch it read (a lost race is
// retried from a fresh read, up to 5 times). Holders notice the larger epoch (GroupState) and
// re-plan; every slot finished under the old epoch is open again, slots m.. are retired (their
// items, checkpoints included, stay), and AcquireSlot with n = 0 joins at m.
//
// m < 1 gives a *ConfigError (field "n") and a group without a meta item an error wrapping
// ErrGroupNotFound, with nothing written; m equal to the current n writes nothing (Changed false).
// [WithResizeMeta] records meta values in the same write.
//
// A write whose answer is lost (timeout, reset connection; or the SDK's retry of it failing its
// condition) is settled by a consistent re-read: a meta item showing n = m and the read epoch + 1
// means it landed. A concurrent ResizeGroup to the same m from the same state looks the same, and
// is reported as this one's (the group is where both callers wanted it). A meta item still as read
// means it did not land (yet): the write is sent again with the same condition, so at most one of
// the two lands.
func (c *Client) ResizeGroup(ctx context.Context, group string, m int, opts ...ResizeOption) (Resize, error) {
	var o resizeOpts
	for _, f := range opts {
		f(&o)
	}
	switch {
	case group == "":
		return Resize{}, bad("group", "must not be empty")
	case m < 1:
		return Resize{}, bad("n", "must be at least 1, got %d", m)
	}
	pk := groupPK(group)
	var lastErr error
	for range maxResizeAttempts {
		meta, err := c.readMeta(ctx, pk)
		if err != nil {
			return Resize{}, err
		}
		if !meta.exists {
			return Resize{}, fmt.Errorf("lock: resize group %q in %q: %w", group, c.table, ErrGroupNotFound)
		}
		if meta.n == m {
			return Resize{OldN: m, NewN: m, Epoch: meta.epoch}, nil
		}
		res := Resize{OldN: meta.n, NewN: m, Epoch: meta.epoch + 1, Changed: true}
		landed, err := c.sendResize(ctx, pk, meta, m, o.pinned(meta))
		switch {
		case landed:
			c.log.Info("lock: group resized", "group", group, "old_n", res.OldN, "n", m, "epoch", res.Epoch)
			return res, nil
		case err != nil && !errors.Is(err, errResizeRaced):
			return Resize{}, fmt.Errorf("lock: resize group %q to %d: %w", group, m, err)
		}
		lastErr = err
	}
	return Resize{}, fmt.Errorf("lock: resize group %q to %d: gave up after %d attempts: %w", group, m, maxResizeAttempts, lastErr)
}

// errResizeRaced says the meta item changed between ResizeGroup's read and its write (or the write's
// outcome stayed unknown with the item still as read): read again and retry.
var errResizeRaced = errors.New("lock: the group's meta item changed under the resize")

// pinned is the meta values WithResizeMeta adds to the meta item as read (none it already has).
func (o resizeOpts) pinned(read metaItem) map[string]string {
	if o.pin == nil {
		return nil
	}
	add := map[string]string{}
	for k, v := range o.pin(GroupState{Exists: true, N: read.n, Epoch: read.epoch, Paused: read.paused, Meta: maps.Clone(read.meta)}) {
		if _, ok := read.meta[k]; !ok {
			add[k] = v
		}
	}
	return add
}

// sendResize writes n = m, epoch = read epoch + 1 (and the pinned meta values) on the meta item as
// read, and reports whether it landed. errResizeRaced means read and retry.
func (c *Client) sendResize(ctx context.Context, pk string, read metaItem, m int, pin map[string]string) (bool, error) {
	epochCond := "#ep = :oldEp"
	if read.epoch == 0 {
		epochCond = "(attribute_not_exists(#ep) OR #ep = :oldEp)"
	}
	update := "SET #n = :n, #ep = :ep"
	names := map[string]string{"#n": attrN, "#ep": attrEpoch}
	values := map[string]types.AttributeValue{
		":n": avN(int64(m)), ":ep": avN(read.epoch + 1), ":oldN": avN(int64(read.n)), ":oldEp": avN(read.epoch),
	}
	for i, k := range slices.Sorted(maps.Keys(pin)) {
		names["#meta"], names[fmt.Sprintf("#mk%d", i)] = attrMeta, k
		values[fmt.Sprintf(":mv%d", i)] = avS(pin[k])
		update += fmt.Sprintf(", #meta.#mk%d = :mv%d", i, i)
	}
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.table),
		Key:                                 key(pk, metaSK),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String("#n = :oldN AND " + epochCond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return true, nil
	}
	if cf, ok := conditionFailed(err); ok {
		if cur := decodeMeta(cf.Item); cur.exists {
			// ALL_OLD: the item the condition failed on. Ours when the SDK retried a write whose
			// first answer was lost.
			return resizeLanded(cur, read, m), errResizeRaced
		}
	} else {
		var te *TableError
		if terr := c.tableErr(err); errors.As(terr, &te) || isValidation(err) || ctx.Err() != nil {
			return false, terr // nothing to settle (a wrong table), or no way to (ctx ended)
		}
	}
	// Unknown outcome (or a failed condition without the item): settle by a consistent re-read.
	cur, rerr := c.readMeta(ctx, pk)
	switch {
	case rerr != nil:
		return false, fmt.Errorf("outcome unknown: %w", errors.Join(err, rerr))
	case !cur.exists:
		return false, fmt.Errorf("%w (the meta item is gone)", ErrGroupNotFound)
	}
	return resizeLanded(cur, read, m), errResizeRaced
}

// resizeLanded reports whether cur is the meta item a resize from read to m wrote.
func resizeLanded(cur, read metaItem, m int) bool {
	return cur.n == m && cur.epoch == read.epoch+1
}
