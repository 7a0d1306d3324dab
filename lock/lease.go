package lock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lease is one held slot (or mutex). Its Context is cancelled as soon as the lease may no longer be
// ours; every write through it is fenced on owner and token. Release it when done.
type Lease struct {
	c          *Client
	pk         string
	group      string
	slot       int
	token      int64
	acquiredAt time.Time
	tookOver   bool
	checkpoint string
	epoch      int64
	prevExpiry time.Time // the expiry the item showed before the take (zero: never held)
	// afterTake: the meta item as the acquisition wrote or found it after the take (recordMeta).
	afterTake *metaItem

	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed to stop the heartbeat
	hbDone chan struct{} // closed when the heartbeat goroutine has returned

	mu        sync.Mutex
	version   int64
	expiresAt time.Time
	endedAt   time.Time // by the holder's clock, when ctx was cancelled

	relMu   sync.Mutex
	relDone bool
	relErr  error
	// relFinish: FinishAndRelease's checkpoint, which Release writes with the finished flag.
	relFinish *string
	stopOnce  sync.Once
}

func (c *Client) newLease(t target, before, got slotItem, now time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{
		c: c, pk: t.pk, group: t.name, slot: got.sk, token: got.token,
		acquiredAt: c.clock.Now(),
		tookOver:   before.exists && before.owner != "" && !before.released,
		checkpoint: got.checkpoint,
		epoch:      got.epoch,
		prevExpiry: before.expiresAt,
		ctx:        ctx, cancel: cancel,
		stop: make(chan struct{}), hbDone: make(chan struct{}),
		version: got.version, expiresAt: got.expiresAt,
	}
	go l.heartbeat(now)
	return l
}

// Group returns the group name (the mutex name for a mutex lease).
func (l *Lease) Group() string { return l.group }

// Slot returns the slot number (0 for a mutex).
func (l *Lease) Slot() int { return l.slot }

// Token returns the fencing token: it grows by one on every acquisition of the slot, so a larger
// token always means a later holder.
func (l *Lease) Token() int64 { return l.token }

// Epoch returns the plan epoch the slot was acquired under: the group's meta epoch as read in the
// round that took it (0 for a group never resized, and for a mutex). It is recorded on the slot
// item; once the group's epoch is larger (a ResizeGroup since), the holder is on an old plan, and
// a MarkFinished of its no longer counts (the slot is finished only under the current epoch).
func (l *Lease) Epoch() int64 { return l.epoch }

// GroupAfterTake returns the group's meta item as the acquisition wrote or found it after taking
// the slot: the first holder of a new group creates the meta item once it has won its slot. It
// stands for a GroupState read made just after the take, which a holder needs to know that the
// plan it took the slot under is still the group's. ok is false when the acquisition read the
// meta item only before its take (the group existed): read GroupState then.
func (l *Lease) GroupAfterTake() (st GroupState, ok bool) {
	if l.afterTake == nil {
		return GroupState{}, false
	}
	return l.afterTake.state(), true
}

// Owner returns the owner id of the client that holds the lease.
func (l *Lease) Owner() string { return l.c.owner }

// Context is cancelled when the lease is lost (a renew or fenced write found another holder), when
// the holder's clock passes ExpiresAt minus the safety margin, or on Release. context.Cause says
// which: an error wrapping ErrLeaseLost, or ErrReleased.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lease is held, else the cause of the cancellation.
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Checkpoint returns the checkpoint stored on the slot when this lease was acquired ("" if none):
// where the previous holder got to.
func (l *Lease) Checkpoint() string { return l.checkpoint }

// PreviousExpiry returns the expiry the slot (or mutex) showed before this lease took it, as its
// previous holder last wrote it (a release leaves it as it was): about when that holder was last
// alive. Zero for one never held before.
func (l *Lease) PreviousExpiry() time.Time { return l.prevExpiry }

// ExpiresAt returns the expiry last written by this holder (by its clock).
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// AcquiredAt returns when the acquisition write succeeded, by the client's clock.
func (l *Lease) AcquiredAt() time.Time { return l.acquiredAt }

// TookOver reports whether the slot was taken from a holder that had not released it (it crashed
// or lost its connection), so work it had in flight may need recovering.
func (l *Lease) TookOver() bool { return l.tookOver }

// currentVersion is the version of the last renewal that landed.
func (l *Lease) currentVersion() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.version
}

// end cancels the lease context once, remembering when (for the tests' history checks).
func (l *Lease) end(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return
	}
	l.endedAt = l.c.clock.Now()
	l.cancel(cause)
}

func (l *Lease) lost(format string, args ...any) error {
	return fmt.Errorf("%w: %s slot %d token %d: %s", ErrLeaseLost, l.group, l.slot, l.token, fmt.Sprintf(format, args...))
}

func (l *Lease) localExpiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt.Add(-l.c.margin)
}
