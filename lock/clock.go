package lock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"
)

// Clock is the time source for all lease timing, and (through worker.Config.Clock) for a worker's
// claim, drain and checkpoint timing. SystemClock is the default; tests pass a fake one that moves
// only when told to, so timing is tested without sleeping.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless stop is called first; stop
	// reports whether it prevented the call (like time.Timer.Stop).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the system clock, the default Clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// AfterFunc calls f after d with time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}

// DefaultOwner is the owner name used when none is given: the host name, the process id and a
// random suffix, so two processes on one host never share a name.
func DefaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
