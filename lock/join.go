package lock

import (
	"context"
	"fmt"
)

// roundReader prepares an acquisition round's reads. A caller that joins at the group's current n
// (n = 0) reads the meta item first, with one consistent GetItem per round (half an RCU on top of
// the round's Query), and the round competes for slots 0..n-1 of that n under its epoch: so a
// standby waiting across a resize competes for the new plan's slots at its next round. A group
// this client last read with n <= windowSize is read whole with its meta item in one Query
// instead (one round trip, no GetItem): the Query's meta item decides n as the GetItem's would, and
// a group grown past windowSize meanwhile is then read by windows as usual. A round right after
// ReadGroup takes that read as its first view (takePrefetch) instead of reading, for n or for a
// join of a group of up to windowSize slots (a join of another group, or of none, reads as above).
// A group without a meta item gives an error wrapping ErrGroupNotFound.
func (c *Client) roundReader(ctx context.Context, t target) (*groupReader, error) {
	pre, prefetched := c.takePrefetch(t.pk)
	if t.join && (!pre.meta.exists || pre.meta.n > windowSize) {
		prefetched = false // a join learns n, or that there is no group, from a read of its own
	}
	if !t.join {
		r := c.newReader(t)
		if prefetched && r.windows == 0 {
			v := wholeView(t, pre.slots, pre.meta)
			r.first, r.prefetched = &v, true
		}
		return r, nil
	}
	var slots map[int]slotItem
	var meta metaItem
	var err error
	small := prefetched || c.knownSmall(t.pk)
	switch {
	case prefetched:
		slots, meta = pre.slots, pre.meta
	case small:
		slots, meta, err = c.readRange(ctx, t.pk, 0, windowSize, true)
	default:
		meta, err = c.readMeta(ctx, t.pk)
	}
	if err != nil {
		return nil, err
	}
	if !meta.exists {
		return nil, fmt.Errorf("lock: join group %q in %q at its current n: %w", t.name, c.table, ErrGroupNotFound)
	}
	if meta.n < 1 {
		return nil, fmt.Errorf("lock: join group %q in %q: its meta item records n = %d", t.name, c.table, meta.n)
	}
	t.n = meta.n
	r := c.newReader(t)
	r.meta, r.hasMeta = meta, true
	if small && r.windows == 0 {
		v := wholeView(t, slots, meta)
		r.first, r.prefetched = &v, prefetched
	}
	return r, nil
}

// confirmFinished decides a whole view whose slots are all finished under its epoch: the slots were
// read after the meta item, so a resize may have re-opened them meanwhile (a holder of the old plan
// can still mark its slot finished after the resize). A fresh consistent read of the meta item
// that shows the same n and epoch proves that, at that read, every slot was finished under the
// current plan: ErrGroupFinished. Otherwise the plan changed and the round found nothing free:
// ErrNoFreeSlot (the next round reads the new plan). A view without a meta item is finished as
// read.
func (c *Client) confirmFinished(ctx context.Context, t target, seen metaItem) error {
	if !seen.exists || t.mutex {
		return ErrGroupFinished
	}
	now, err := c.readMeta(ctx, t.pk)
	if err != nil {
		return err
	}
	if now.n != seen.n || now.epoch != seen.epoch {
		return fmt.Errorf("%w: the plan changed (n %d -> %d, epoch %d -> %d) while the round read the slots",
			ErrNoFreeSlot, seen.n, now.n, seen.epoch, now.epoch)
	}
	return ErrGroupFinished
}
