package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/dynapart/dynapart/configerr"
	"github.com/dynapart/dynapart/ledger"
)

// ErrStopped is the cause given to a handler's context when the worker shuts down and the drain
// timeout has passed. A handler error wrapping it, returned once the worker is stopping (Run's
// context done, the deadline margin reached, the group resized), marks the attempt interrupted by
// the stop (not counted) rather than failed, unless the handler's claim is about to expire (see
// the package doc's Handler contexts).
var ErrStopped = errors.New("dynapart: worker stopped")

// ErrClaimExpiring is the cause given to a handler's context when its claim is about to expire.
var ErrClaimExpiring = errors.New("dynapart: claim about to expire")

// ConfigError says which Config field is invalid and why. Nothing has been written when New or Run
// returns it. It is configerr.Error (Pkg "dynapart"), the one configuration error shape of
// dynapart; lock.ConfigError and scan.ConfigError are the same type.
type ConfigError = configerr.Error

// ErrRunTwice is returned by Run while another Run of the same Worker is running.
var ErrRunTwice = errors.New("dynapart: Run is already running on this Worker")

// PermanentError marks a handler error that must not be retried: the item is dead-lettered at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + errString(e.Err) }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so the framework dead-letters the item at once instead of retrying it.
func Permanent(err error) error { return &PermanentError{Err: err} }

// RetryAfterError asks for the next attempt no earlier than After from now.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %s", e.After, errString(e.Err))
}
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err so the item is retried no earlier than d from now (instead of the backoff).
// The attempt still counts towards MaxAttempts.
func RetryAfter(err error, d time.Duration) error { return &RetryAfterError{Err: err, After: d} }

// PanicError is a recovered handler panic; it counts as a failed attempt.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// classify tells what a handler's error asks for. Effects the ledger refused (ErrEffectRefused:
// nothing was written) fail for good as a Permanent error does.
func classify(err error) (permanent bool, retryAfter time.Duration) {
	var p *PermanentError
	if errors.As(err, &p) || errors.Is(err, ledger.ErrEffectRefused) {
		return true, 0
	}
	var r *RetryAfterError
	if errors.As(err, &r) {
		return false, r.After
	}
	return false, 0
}
