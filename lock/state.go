package lock

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// GroupState is the group's meta item: its plan (n and epoch), pause flag and meta values.
type GroupState struct {
	Exists bool // false: the group has no meta item (never run, or a typo); the rest is zero
	N      int
	Epoch  int64 // +1 per ResizeGroup (and per ResetGroup); 0 for a group never resized
	// ResetEpoch is the epoch the last ResetGroup started (0: never reset): positions recorded
	// under an older epoch belong to the run before the reset.
	ResetEpoch int64
	Paused     bool
	// PausedReason says why the group is paused: PausedByOperator or PausedByBudget ("" when not
	// paused, or paused before reasons were kept).
	PausedReason string
	Budget       Budget
	Meta         map[string]string
}

// GroupState reads the group's meta item with one consistent GetItem (one RCU for a meta item
// under 4 KB): what a caller about to act on the plan or the pause flag needs. An Epoch larger
// than a holder's [Lease.Epoch] means the plan changed.
func (c *Client) GroupState(ctx context.Context, group string) (GroupState, error) {
	return c.groupState(ctx, group, true)
}

// PeekGroup reads the group's meta item as GroupState does, with an eventually consistent GetItem:
// half the read units. It may miss a write of about the last second, and one peek may show an older
// state than an earlier one, so a holder that watches the group every heartbeat peeks, and reads
// GroupState before it acts on what a peek shows changed.
func (c *Client) PeekGroup(ctx context.Context, group string) (GroupState, error) {
	return c.groupState(ctx, group, false)
}

func (c *Client) groupState(ctx context.Context, group string, consistent bool) (GroupState, error) {
	if group == "" {
		return GroupState{}, bad("group", "must not be empty")
	}
	m, err := c.readMetaWith(ctx, groupPK(group), consistent)
	if err != nil {
		return GroupState{}, err
	}
	return m.state(), nil
}

// state is the meta item as a GroupState.
func (m metaItem) state() GroupState {
	if !m.exists {
		return GroupState{}
	}
	return GroupState{Exists: true, N: m.n, Epoch: m.epoch, ResetEpoch: m.reset, Paused: m.paused,
		PausedReason: m.pausedReason(), Budget: m.budget, Meta: maps.Clone(m.meta)}
}

// OldPlanHolders returns, in order, the slots of the group (any slot item, also those at or past
// the current n) that are held, by this client's clock and MaxClockSkew as in GroupStatus, by a
// holder that acquired them under a plan epoch older than epoch. A holder under the new plan waits
// until there are none before it composes its position from the old plan's checkpoints: old
// holders release within a heartbeat of the resize, and a frozen one's lease expires.
//
// It reads the whole group with one consistent Query: every slot item and the meta item, at about
// one RCU per 4 KB of items (a group of a few hundred slots without large checkpoints costs a few
// RCU; items with checkpoints cost their size), more pages only past 1 MB.
func (c *Client) OldPlanHolders(ctx context.Context, group string, epoch int64) ([]int, error) {
	if group == "" {
		return nil, bad("group", "must not be empty")
	}
	slots, _, err := c.readAll(ctx, groupPK(group))
	if err != nil {
		return nil, fmt.Errorf("lock: old-plan holders of group %q: %w", group, err)
	}
	now := c.clock.Now()
	var held []int
	for _, s := range slices.Sorted(maps.Keys(slots)) {
		if it := slots[s]; s >= 0 && it.epoch < epoch && c.held(it, now) {
			held = append(held, s)
		}
	}
	return held, nil
}

// pausedReason is the reason of a pause, "" when not paused.
func (m metaItem) pausedReason() string {
	if !m.paused {
		return ""
	}
	return m.reason
}
