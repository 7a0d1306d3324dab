// Package clock has a fake clock for tests of lease and claim timing (the real one is
// lock.SystemClock).
//
// It satisfies lock.Clock (and so worker.Config.Clock): Now, After and AfterFunc. The fake moves only when a
// test calls Advance, and BlockUntil lets a test wait, without sleeping, until the code under test
// is waiting on the clock.
package clock

import (
	"sync"
	"time"
)

// Fake is a manually advanced clock. The zero value is not usable; use NewFake.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	changed chan struct{} // closed and replaced whenever waiters change
	lastID  uint64
}

type waiter struct {
	at time.Time
	ch chan time.Time // After's channel; nil for AfterFunc
	fn func()         // AfterFunc's function
	id uint64         // tells AfterFunc's waiters apart, for stop
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t, changed: make(chan struct{})} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives the fake time once the clock has been advanced by d.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), ch: ch})
	f.signal()
	return ch
}

// AfterFunc calls fn in its own goroutine once the clock has been advanced by d, unless stop is
// called first.
func (f *Fake) AfterFunc(d time.Duration, fn func()) (stop func() bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d <= 0 {
		go fn()
		return func() bool { return false }
	}
	f.lastID++
	id := f.lastID
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), fn: fn, id: id})
	f.signal()
	return func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.waiters {
			if x.id == id {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				f.signal()
				return true
			}
		}
		return false
	}
}

// Advance moves the clock forward and fires every After and AfterFunc that is due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		switch {
		case w.at.After(f.now):
			kept = append(kept, w)
		case w.fn != nil:
			go w.fn()
		default:
			w.ch <- f.now
		}
	}
	f.waiters = kept
	f.signal()
}

// Waiters is the number of pending After and AfterFunc calls.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntil returns once at least n After or AfterFunc calls are pending (or the done channel closes).
func (f *Fake) BlockUntil(n int, done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if len(f.waiters) >= n {
			f.mu.Unlock()
			return true
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

func (f *Fake) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}
