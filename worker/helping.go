package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynapart/dynapart/lock"
)

// A once-worker whose slot is finished takes any free, unfinished slot before it exits
// (runHelping). When none is free, every unfinished slot is held; but a held lease only says that
// its holder renewed it within the lease's time to live, not that the holder is still alive. A
// holder killed a moment ago holds its slot until the lease runs out, and with no standby its share
// would be left undone while the last once-workers exit 0 (helper-75). So before it exits, a
// helping worker watches the held slots until each holder shows itself alive (its lease renewed:
// the version moved; or the slot finished) or one runs out, which it then takes over. A live holder
// renews every Heartbeat, so this costs about one heartbeat at the end of a once-worker's run, and
// reads the group (one Query) a few times.

// help makes rounds of TryAcquireSlot until one takes a slot or every unfinished slot is held by a
// live holder (lock.ErrNoFreeSlot). A watch whose read of the group fails is tried again, as a
// failed pass is (1s, doubling up to 30s), for up to OutageTimeout; then, or at once for a refusal
// for good, Run ends with the error: a worker that cannot tell whether a holder is alive does not
// exit 0 as if it were (helper-80: one throttled read left a dead holder's share undone).
func (w *Worker) help(ctx context.Context, e *env, take func() (*lock.Lease, error)) (*lock.Lease, error) {
	var failing outage
	for {
		l, err := take()
		if !errors.Is(err, lock.ErrNoFreeSlot) {
			return l, err
		}
		free, werr := w.awaitHolders(ctx, e)
		switch {
		case werr == nil && !free:
			return nil, err
		case werr == nil:
			failing = outage{}
			continue
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		werr = fmt.Errorf("dynapart: read the group to see whether the holders of its unfinished slots are alive: %w", werr)
		if !lock.Retryable(werr) || failing.fail(w.cfg.Clock.Now(), w.cfg.OutageTimeout) {
			return nil, werr
		}
		pause := backoff(time.Second, 30*time.Second, failing.failures)
		w.cfg.Logger.Warn("dynapart: watching the group's held slots failed; retrying", "group", w.cfg.Group, "err", werr, "retry_in", pause)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.cfg.Clock.After(pause):
		}
	}
}

// awaitHolders watches the held, unfinished slots of the group until every holder has shown
// itself alive, or one slot is free (its lease ran out, a resize changed the plan): then it
// reports free, and the worker tries to take a slot again.
func (w *Worker) awaitHolders(ctx context.Context, e *env) (free bool, _ error) {
	st, err := e.locks.GroupStatus(ctx, w.cfg.Group)
	if err != nil {
		return false, err
	}
	watch := heldSlots(st)
	for len(watch) > 0 {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-w.cfg.Clock.After(w.watchPause(st, watch)):
		}
		now, err := e.locks.GroupStatus(ctx, w.cfg.Group)
		if err != nil {
			return false, err
		}
		if now.N != st.N || now.Epoch != st.Epoch {
			return true, nil // resized or reset: the next round reads the new plan
		}
		if freed := watched(now, watch); freed {
			return true, nil
		}
		st = now
	}
	return false, nil
}

// heldSlots are the slots of st's plan that are held and not finished, with their lease versions.
func heldSlots(st *lock.GroupStatus) map[int]int64 {
	held := map[int]int64{}
	for _, s := range st.Slots {
		if s.Slot < st.N && s.Held && !s.Finished {
			held[s.Slot] = s.Version
		}
	}
	return held
}

// watched reports whether a watched slot is free in st (unfinished and not held: its lease ran
// out unrenewed, or its holder released it unfinished), and takes out of watch the slots whose
// holder showed itself alive (finished, or the lease's version moved: renewed or taken over).
func watched(st *lock.GroupStatus, watch map[int]int64) (free bool) {
	for _, s := range st.Slots {
		v, ok := watch[s.Slot]
		switch {
		case !ok:
		case s.Finished || (s.Held && s.Version != v):
			delete(watch, s.Slot)
		case !s.Held:
			return true
		}
	}
	return false
}

// watchPause is how long to wait before reading the group again: a heartbeat, or less when a
// watched lease runs out sooner (free at expires_at + MaxClockSkew, the lock's rule).
func (w *Worker) watchPause(st *lock.GroupStatus, watch map[int]int64) time.Duration {
	pause := w.cfg.Heartbeat
	now := w.cfg.Clock.Now()
	for _, s := range st.Slots {
		if _, ok := watch[s.Slot]; ok {
			pause = min(pause, s.ExpiresAt.Add(w.cfg.MaxClockSkew).Sub(now)+watchMargin)
		}
	}
	return max(pause, watchMargin)
}

// watchMargin is how long after a lease's end awaitHolders reads the group again.
const watchMargin = 100 * time.Millisecond
