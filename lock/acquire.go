package lock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"
)

// AcquireOption configures one AcquireSlot or TryAcquireSlot call.
type AcquireOption func(*acquireOpts)

type acquireOpts struct {
	meta, metaDefaults map[string]string
}

// WithGroupMeta records meta on the group's meta item (together with n) when the group is first
// used, and makes later callers with a different value fail with ErrGroupMismatch. Without it the
// meta values are not compared.
func WithGroupMeta(meta map[string]string) AcquireOption {
	return func(o *acquireOpts) {
		if meta == nil {
			meta = map[string]string{}
		}
		o.meta = meta
	}
}

// target is what an acquisition round competes for: slots 0..n-1 of a group, or a mutex (n = 1,
// no meta item).
type target struct {
	pk    string
	name  string
	n     int
	meta  map[string]string
	defs  map[string]string // meta defaults, see WithGroupMetaDefaults
	mutex bool
	sweep bool // read window after window until one has a free slot (groupReader)
	// join: the caller passed n = 0, "the group's current n": every round reads n from the meta
	// item (roundReader) and the group must exist.
	join bool
}

// maxLostRaces is how many conditional writes a round may lose before it gives up (see
// acquireRound).
const maxLostRaces = 2

// errTaken says a conditional acquisition write lost its race; the item it returns is the winner's.
var errTaken = errors.New("lock: slot taken by another contender")

// errRacesLost is the ErrNoFreeSlot of a round that saw free slots but lost the races for them.
var errRacesLost = fmt.Errorf("%w: lost the races for the free slots seen", ErrNoFreeSlot)

// round is what one acquireRound has seen so far.
type round struct {
	lostRaces int
	freeAt    time.Time // the earliest a held slot seen becomes free (freeFrom), on our clock (zero: none)
}

// heldUntil is the ErrNoFreeSlot (or errRacesLost) of a round that saw a held slot become free
// at freeAt by freeFrom's rule: a standby looks again just after it (untilFree) rather than at its
// next poll, so a takeover waits for the lease and MaxClockSkew, not for the poll as well.
type heldUntil struct {
	error
	freeAt time.Time
}

func (e *heldUntil) Unwrap() error { return e.error }

// noFreeSlot is the error of a round that took nothing.
func (rd *round) noFreeSlot() error {
	err := ErrNoFreeSlot
	if rd.lostRaces > 0 {
		err = errRacesLost
	}
	if rd.freeAt.IsZero() {
		return err
	}
	return &heldUntil{error: err, freeAt: rd.freeAt}
}

// AcquireSlot takes one free slot of group (slots 0..n-1), waiting as a hot standby while every
// slot is held: it polls (jittered, on the client's clock, and in a group of up to 64 slots just
// after a lease it saw runs out when that is sooner) and takes a slot as soon as it sees its
// holder release it or let it expire (a poll of a group of more than 64 slots reads 64 of them:
// see the package doc). It returns ErrGroupFinished once every slot is finished under the group's
// current plan epoch, a *GroupMismatchError when the group was set up with another n or meta, and
// ctx's error when ctx ends first.
//
// n = 0 joins the group at its current n, read from the meta item at every round (the first
// round right after ReadGroup takes it from that read), so a standby waiting across a
// ResizeGroup competes for the new slots; a group without a meta item gives an
// error wrapping ErrGroupNotFound at once (no wait). The lease records the plan epoch of the
// meta item read in the round that took the slot ([Lease.Epoch]).
func (c *Client) AcquireSlot(ctx context.Context, group string, n int, opts ...AcquireOption) (*Lease, error) {
	t, err := c.slotTarget(group, n, opts)
	if err != nil {
		return nil, err
	}
	return c.acquireWait(ctx, t)
}

// TryAcquireSlot makes one round of AcquireSlot (n = 0 joins at the current n, as there): it
// returns ErrNoFreeSlot instead of waiting when every unfinished slot is held. Under contention a round also ends with ErrNoFreeSlot after
// losing the race for two slots, as others are then taking the slots it saw free.
func (c *Client) TryAcquireSlot(ctx context.Context, group string, n int, opts ...AcquireOption) (*Lease, error) {
	t, err := c.slotTarget(group, n, opts)
	if err != nil {
		return nil, err
	}
	t.sweep = true // every window: ErrNoFreeSlot means no slot anywhere is free
	return c.acquireRound(ctx, t)
}

func (c *Client) slotTarget(group string, n int, opts []AcquireOption) (target, error) {
	var o acquireOpts
	for _, f := range opts {
		f(&o)
	}
	switch {
	case group == "":
		return target{}, bad("group", "must not be empty")
	case n < 0:
		return target{}, bad("n", "must be at least 1 (or 0: the group's current n), got %d", n)
	}
	return target{pk: groupPK(group), name: group, n: n, meta: o.meta, defs: o.metaDefaults, join: n == 0}, nil
}

// acquireWait is the hot standby: it polls until a slot is free. A standby must outlive an outage
// of DynamoDB (a restart, throttling beyond the SDK's retries, a dropped connection), so such
// errors are logged and retried with a growing pause; only errors that no retry can cure (a
// wrong group, a missing or wrongly keyed table, refused credentials) end the wait.
func (c *Client) acquireWait(ctx context.Context, t target) (*Lease, error) {
	failures := 0
	t.sweep = true // the first round looks at every window until it finds a free slot
	for {
		l, err := c.acquireRound(ctx, t)
		pause := c.jitter()
		// After a full sweep found nothing free, a poll reads one window; after a round that lost
		// the races for free slots, the next one sweeps again, and so does the round after one
		// that failed before its sweep was done.
		if errors.Is(err, ErrNoFreeSlot) {
			t.sweep = errors.Is(err, errRacesLost)
		}
		switch {
		case err == nil:
			return l, nil
		case errors.Is(err, ErrNoFreeSlot):
			failures = 0
			pause = c.untilFree(err, pause)
		case ctx.Err() != nil || !Retryable(err):
			return nil, err
		default:
			failures++
			pause = min(c.poll<<min(failures, 5), 30*time.Second)
			c.log.Warn("lock: looking for a free slot failed, retrying", "group", t.name, "err", err,
				"failures", failures, "retry_in", pause)
		}
		if err := c.wait(ctx, t.name, pause); err != nil {
			return nil, err
		}
	}
}

// acquireRound is one read of the group (the whole group up to windowSize slots, else a window of
// it and the meta item: nextView) followed by conditional writes on the slots it found free, in
// random order so that contenders starting together spread over the slots instead of all fighting
// for slot 0. A lost race returns the winner's item (ALL_OLD), which keeps the view fresh without
// another read; after maxLostRaces lost races the round gives up. A sweeping round whose window
// had no free slot left for it reads on to the next windows. The meta item is written only by a
// winner that found none, so a contender that loses pays no meta write: on a cold start of 64
// contenders for 32 slots the median contender makes 3 calls. A join (n = 0) reads the meta item
// first and never writes it (roundReader). A round whose view is ReadGroup's read and disagrees
// with the caller's n or meta is made again on a fresh read, as that read may be stale. The slot is taken under the plan epoch of the view's
// meta item, and a view whose slots are all finished under it ends the round with
// ErrGroupFinished only once a fresh read confirms the plan (confirmFinished).
func (c *Client) acquireRound(ctx context.Context, t target) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	asked := t
	r, err := c.roundReader(ctx, t)
	if err != nil {
		return nil, err
	}
	t = r.t // a join's n is the meta item's
	v, err := c.nextView(ctx, r)
	if err != nil {
		return nil, err
	}
	meta := v.meta
	if !t.mutex && meta.exists {
		if err := checkMeta(t, meta); err != nil {
			if r.prefetched {
				return c.acquireRound(ctx, asked) // ReadGroup's read may be stale: decide on a fresh one
			}
			return nil, err
		}
	}
	// won finishes an acquisition: the meta item is written only by a winner that found none.
	won := func(l *Lease) (*Lease, error) {
		if !t.mutex && !t.join && !meta.exists {
			after, err := c.recordMeta(ctx, t)
			if err != nil {
				// Never hand out a slot of a group we disagree with; give it straight back.
				_ = l.Release(context.WithoutCancel(ctx))
				return nil, err
			}
			l.afterTake = &after
		}
		c.log.Info("lock: acquired", "pk", t.pk, "slot", l.slot, "token", l.token, "took_over", l.tookOver)
		return l, nil
	}
	if l, err := c.adoptLanded(ctx, t, v, c.clock.Now()); err != nil {
		return nil, err
	} else if l != nil {
		return won(l)
	}
	var rd round
	for {
		l, err := c.takeFree(ctx, t, v, &rd)
		switch {
		case err != nil:
			return nil, err
		case l != nil:
			return won(l)
		case rd.lostRaces >= maxLostRaces || !r.more():
			return nil, rd.noFreeSlot()
		}
		if v, err = c.nextView(ctx, r); err != nil {
			return nil, err
		}
		if !t.mutex && v.meta.exists {
			if err := checkMeta(t, v.meta); err != nil { // a whole-group read after windows brings a fresh meta item
				return nil, err
			}
		}
	}
}

// takeFree tries the slots of v that are free, in random order, until it wins one or has lost
// maxLostRaces races in the round (counted in rd, which also keeps the earliest time a held slot
// of v becomes free). It returns no lease and no error when it found nothing to take, and
// ErrGroupFinished when v is the whole group and every slot of it is finished under the view's
// plan epoch, and still so by a fresh read of the meta item.
func (c *Client) takeFree(ctx context.Context, t target, v view, rd *round) (*Lease, error) {
	now := c.clock.Now()
	var free []int
	for s := v.lo; s < v.hi; s++ {
		it := v.slots[s]
		it.sk = s
		if it.finishedAt(v.meta.epoch) {
			continue
		}
		at := c.freeFrom(t.pk, it, now)
		switch {
		case !now.Before(at):
			free = append(free, s)
		case v.whole() && (rd.freeAt.IsZero() || at.Before(rd.freeAt)):
			rd.freeAt = at // (the next poll of a larger group reads the next window)
		}
	}
	mrand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	for _, s := range free {
		if rd.lostRaces >= maxLostRaces {
			// Others are taking the slots faster than our view ages: a fresh look after a
			// jittered wait is cheaper than chasing a stale view slot by slot (thundering herd).
			break
		}
		it := v.slots[s]
		it.sk = s
		l, cur, err := c.take(ctx, t, it, v.meta.epoch)
		if errors.Is(err, errTaken) {
			v.slots[s] = cur
			rd.lostRaces++
			continue
		}
		return l, err
	}
	if v.whole() && v.allFinished() {
		return nil, c.confirmFinished(ctx, t, v.meta)
	}
	return nil, nil
}
