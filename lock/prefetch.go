package lock

import (
	"context"
	"time"
)

// prefetch is a read of a group's meta item and slots 0..windowSize-1, made by ReadGroup for the
// client's next acquisition round.
type prefetch struct {
	slots map[int]slotItem
	meta  metaItem
	at    time.Time // by the client's clock, after the read
}

// ReadGroup is GroupState for a caller about to acquire a slot of the group (a worker starting):
// it reads the meta item together with slots 0..63 in one consistent Query, and the client's
// next acquisition round for the group (AcquireSlot or TryAcquireSlot, for n or at the group's
// current n) takes its first view from that read instead of reading the group again, when the
// round starts within a poll interval (WithPollInterval) and the group has at most 64 slots. A
// start then waits on one read of the group before its take instead of two. The read is used
// once; a round that loses the races for the slots it saw free reads the group again, as always.
// It costs the slot items' RCU on top of GroupState's half RCU (for a group of more than 64
// slots, 64 slot items the acquisition does not use).
func (c *Client) ReadGroup(ctx context.Context, group string) (GroupState, error) {
	if group == "" {
		return GroupState{}, bad("group", "must not be empty")
	}
	pk := groupPK(group)
	slots, meta, err := c.readRange(ctx, pk, 0, windowSize, true)
	if err != nil {
		return GroupState{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prefetched == nil {
		c.prefetched = map[string]prefetch{}
	}
	c.prefetched[pk] = prefetch{slots: slots, meta: meta, at: c.clock.Now()}
	return meta.state(), nil
}

// takePrefetch returns (and forgets) ReadGroup's read of pk, unless it is older than a poll
// interval or the client has an acquisition write of unknown outcome in the group (the read may
// predate it: the round reads the group, so that adoptLanded sees the write if it landed).
func (c *Client) takePrefetch(pk string) (prefetch, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.prefetched[pk]
	if !ok {
		return prefetch{}, false
	}
	delete(c.prefetched, pk)
	if c.clock.Now().Sub(p.at) > c.poll {
		return prefetch{}, false
	}
	for k := range c.unsettled {
		if k.pk == pk {
			return prefetch{}, false
		}
	}
	return p, true
}
