package lock

import (
	"context"
	"errors"
	"sync"
)

// Mutex is a named lock on the lock table (pk "mutex#<name>", sk 0) with the same lease, heartbeat
// and fencing as a slot. One Mutex value holds at most one lease at a time; use one Mutex per
// goroutine that competes.
type Mutex struct {
	c    *Client
	name string

	mu    sync.Mutex
	lease *Lease
}

// NewMutex returns the named mutex. It does not touch DynamoDB.
func (c *Client) NewMutex(name string) *Mutex { return &Mutex{c: c, name: name} }

func (m *Mutex) target() (target, error) {
	if m.name == "" {
		return target{}, bad("mutex name", "must not be empty")
	}
	return target{pk: mutexPK(m.name), name: m.name, n: 1, mutex: true}, nil
}

// Lock waits (polling with jitter) until the mutex is ours or ctx ends. Locking a Mutex that
// already holds a live lease returns at once.
func (m *Mutex) Lock(ctx context.Context) error {
	t, err := m.target()
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease != nil && m.lease.Err() == nil {
		return nil
	}
	l, err := m.c.acquireWait(ctx, t)
	if err != nil {
		return err
	}
	m.lease = l
	return nil
}

// TryLock makes one attempt: true when the mutex is now ours, false when someone else holds it.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	t, err := m.target()
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease != nil && m.lease.Err() == nil {
		return true, nil
	}
	l, err := m.c.acquireRound(ctx, t)
	if errors.Is(err, ErrNoFreeSlot) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m.lease = l
	return true, nil
}

// Unlock releases the mutex (see Lease.Release); ErrNotLocked when this Mutex holds no lease.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return ErrNotLocked
	}
	err := m.lease.Release(ctx)
	if err == nil || errors.Is(err, ErrLeaseLost) {
		m.lease = nil
	}
	return err
}

// Lease returns the current hold (its token fences writes elsewhere; its Context ends when the
// hold is lost), or nil when not held.
func (m *Mutex) Lease() *Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lease
}
