package lock

import (
	"context"
	"time"
)

// MutexState is a mutex as one read of its item shows it, taken by nobody. A caller that shares
// many mutexes among processes (the stream reader leases one per shard) reads it to learn whether
// a mutex is worth a TryLock, or finished, without writing.
type MutexState struct {
	Name string
	// Exists is false for a mutex never locked; every other field is then zero.
	Exists bool
	// Owner is the owner id of the last holder (also after a release or an expiry).
	Owner string
	Token int64
	// Held says a contender using this client would not take the mutex now, as SlotStatus.Held:
	// not released and expires_at + MaxClockSkew not yet passed, by the caller's clock.
	Held bool
	// Finished says a holder marked the mutex finished (MarkFinished, FinishWithCheckpoint,
	// FinishAndRelease): Lock and TryLock then return ErrGroupFinished and take nothing.
	Finished   bool
	Checkpoint string
	ExpiresAt  time.Time
}

// MutexState reads the named mutex with one consistent GetItem (half an RCU for an item under
// 4 KB). It takes nothing and writes nothing.
func (c *Client) MutexState(ctx context.Context, name string) (MutexState, error) {
	if name == "" {
		return MutexState{}, bad("mutex name", "must not be empty")
	}
	it, err := c.readSlot(ctx, mutexPK(name), 0)
	if err != nil {
		return MutexState{}, err
	}
	if !it.exists {
		return MutexState{Name: name}, nil
	}
	return MutexState{Name: name, Exists: true, Owner: it.owner, Token: it.token,
		Held: c.held(it, c.clock.Now()), Finished: it.finished, Checkpoint: it.checkpoint,
		ExpiresAt: it.expiresAt}, nil
}
