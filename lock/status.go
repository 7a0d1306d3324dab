package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GroupStatus is a snapshot of a group: its recorded n, plan epoch and meta, every slot 0..N-1,
// and after that every slot item past N (slots retired by a ResizeGroup to a smaller n, with the
// checkpoints their holders saved).
type GroupStatus struct {
	Group string
	N     int   // 0 when the group has never been used
	Epoch int64 // the plan epoch: +1 per ResizeGroup (and per ResetGroup)
	// ResetEpoch is the epoch the last ResetGroup started (0: never reset).
	ResetEpoch int64
	Meta       map[string]string
	// Paused is the group's pause flag (PauseGroup / ResumeGroup), PausedReason why (see
	// GroupState.PausedReason).
	Paused       bool
	PausedReason string
	// Budget is the group's capacity budget and reported consumption (see SetBudget).
	Budget Budget
	Slots  []SlotStatus
}

// SlotStatus is one slot. A slot never acquired appears with zero values.
type SlotStatus struct {
	Slot      int
	Owner     string
	Token     int64
	Version   int64
	ExpiresAt time.Time
	Released  bool
	// Finished says the slot is finished under the group's current plan epoch: marked finished by
	// a holder that acquired it under that epoch. A slot finished under an older plan (before a
	// ResizeGroup) is open again and shows false.
	Finished   bool
	Checkpoint string
	// Epoch is the plan epoch its last holder acquired it under (0 before any resize).
	Epoch int64
	// Held says a contender using this client would not take the slot now: not released and
	// expires_at + MaxClockSkew not yet passed, by the caller's clock.
	Held bool
}

// Finished reports a group whose slots 0..N-1 are all finished under its current plan (slots past
// N, left by a scale-down, do not count): a once job of it is done, and a once-worker of it has
// nothing to do; a group never used (N = 0) is not finished.
func (s *GroupStatus) Finished() bool {
	if s.N == 0 {
		return false
	}
	seen := 0
	for _, sl := range s.Slots {
		if sl.Slot < s.N {
			if !sl.Finished {
				return false
			}
			seen++
		}
	}
	return seen == s.N
}

// GroupStatus reads the group with one consistent Query (every slot item, also those past n).
func (c *Client) GroupStatus(ctx context.Context, group string) (*GroupStatus, error) {
	if group == "" {
		return nil, bad("group", "must not be empty")
	}
	slots, meta, err := c.readAll(ctx, groupPK(group))
	if err != nil {
		return nil, err
	}
	st := &GroupStatus{Group: group, N: meta.n, Epoch: meta.epoch, ResetEpoch: meta.reset, Meta: meta.meta, Paused: meta.paused,
		PausedReason: meta.pausedReason(), Budget: meta.budget}
	n := meta.n
	for s := range slots {
		n = max(n, s+1)
	}
	now := c.clock.Now()
	for s := range n {
		it, ok := slots[s]
		ss := SlotStatus{Slot: s}
		if ok {
			ss = SlotStatus{
				Slot: s, Owner: it.owner, Token: it.token, Version: it.version, ExpiresAt: it.expiresAt,
				Released: it.released, Finished: it.finishedAt(meta.epoch), Checkpoint: it.checkpoint,
				Epoch: it.epoch, Held: c.held(it, now),
			}
		}
		st.Slots = append(st.Slots, ss)
	}
	return st, nil
}

func (c *Client) held(it slotItem, now time.Time) bool {
	return it.exists && it.owner != "" && !it.released && !now.After(it.expiresAt.Add(c.skew))
}

// ResetGroup clears every slot's finished flag and checkpoint so a one-shot job can run again. It
// refuses with ErrGroupBusy while any slot is held, and each slot is reset only if it is unchanged
// since that check (token and version), so a slot acquired meanwhile is left alone and reported.
// It also removes each slot's owner: every fenced write (and renew) of a lease acquired before the
// reset then fails with ErrLeaseLost, so a holder that was paused across the reset can neither
// mark the slot finished again nor restore an old checkpoint. The next holder gets the next token.
// It first moves the group's plan epoch on and records it as the reset epoch (GroupState.ResetEpoch),
// so that positions recorded under the earlier epochs (a resize's record of where every unit stood)
// are known to belong to the run before the reset; a resize racing the reset makes it fail with
// ErrGroupBusy.
func (c *Client) ResetGroup(ctx context.Context, group string) error {
	if group == "" {
		return bad("group", "must not be empty")
	}
	pk := groupPK(group)
	slots, meta, err := c.readAll(ctx, pk)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	for s, it := range slots {
		if c.held(it, now) {
			return fmt.Errorf("lock: reset group %q: slot %d held by %q: %w", group, s, it.owner, ErrGroupBusy)
		}
	}
	if meta.exists {
		if err := c.startResetEpoch(ctx, group, meta); err != nil {
			return err
		}
	}
	for s, it := range slots {
		_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(c.table),
			Key:                       key(pk, s),
			UpdateExpression:          aws.String("REMOVE #fin, #cp, #owner"),
			ConditionExpression:       aws.String("#token = :token AND #version = :version"),
			ExpressionAttributeNames:  map[string]string{"#fin": attrFinished, "#cp": attrCheckpoint, "#owner": attrOwner, "#token": attrToken, "#version": attrVersion},
			ExpressionAttributeValues: map[string]types.AttributeValue{":token": avN(it.token), ":version": avN(it.version)},
		})
		if _, ok := conditionFailed(err); ok {
			return fmt.Errorf("lock: reset group %q: slot %d changed during the reset: %w", group, s, ErrGroupBusy)
		}
		if err != nil {
			return fmt.Errorf("lock: reset group %q slot %d: %w", group, s, c.tableErr(err))
		}
	}
	return nil
}

// startResetEpoch moves the meta item's epoch from the one read to the next and records it as the
// reset epoch. A lost answer is settled by a re-read.
func (c *Client) startResetEpoch(ctx context.Context, group string, meta metaItem) error {
	pk := groupPK(group)
	next := meta.epoch + 1
	cond := "#ep = :old"
	if meta.epoch == 0 {
		cond = "(attribute_not_exists(#ep) OR #ep = :old)"
	}
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(c.table),
		Key:                       key(pk, metaSK),
		UpdateExpression:          aws.String("SET #ep = :next, #reset = :next"),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND " + cond),
		ExpressionAttributeNames:  map[string]string{"#ep": attrEpoch, "#reset": attrResetEpoch, "#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":old": avN(meta.epoch), ":next": avN(next)},
	})
	if err == nil {
		return nil
	}
	if now, rerr := c.readMeta(ctx, pk); rerr == nil && now.epoch == next && now.reset == next {
		return nil // ours landed (a lost answer, or the SDK's retry of it refused)
	}
	if _, ok := conditionFailed(err); ok {
		return fmt.Errorf("lock: reset group %q: its plan changed during the reset: %w", group, ErrGroupBusy)
	}
	return fmt.Errorf("lock: reset group %q: %w", group, c.tableErr(err))
}
