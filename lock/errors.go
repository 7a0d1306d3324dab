package lock

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/dynapart/dynapart/configerr"
)

var (
	// ErrLeaseLost means the lease is no longer ours: a renew or a fenced write found another owner
	// or token, or the holder's own clock passed the lease's expiry minus the safety margin.
	ErrLeaseLost = errors.New("lock: lease lost")
	// ErrReleased is the cause of a lease context cancelled by Release.
	ErrReleased = errors.New("lock: lease released")
	// ErrNoFreeSlot is returned by TryAcquireSlot and TryLock-style calls when every slot is held.
	ErrNoFreeSlot = errors.New("lock: no free slot")
	// ErrGroupFinished means every slot of the group is marked finished: there is nothing left to do.
	ErrGroupFinished = errors.New("lock: every slot of the group is finished")
	// ErrGroupMismatch is wrapped by *GroupMismatchError: the caller's n or meta differs from the
	// group's meta item.
	ErrGroupMismatch = errors.New("lock: group mismatch")
	// ErrGroupBusy is returned by ResetGroup while a slot of the group is held (or changes under it).
	ErrGroupBusy = errors.New("lock: group has held slots")
	// ErrNotLocked is returned by Mutex.Unlock when the mutex is not held by this Mutex.
	ErrNotLocked = errors.New("lock: mutex not locked")
)

// TableError says which lock table is unusable and why: missing, wrongly keyed, not active.
type TableError struct {
	Table   string
	Problem string
	Err     error // the DynamoDB error behind it, if any
}

func (e *TableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("lock: table %q: %s: %v", e.Table, e.Problem, e.Err)
	}
	return fmt.Sprintf("lock: table %q: %s", e.Table, e.Problem)
}

// Unwrap returns the DynamoDB error behind the problem.
func (e *TableError) Unwrap() error { return e.Err }

// GroupMismatchError names the group setting that differs between the group's meta item (Have)
// and the caller (Want). Field is "n" or "meta.<key>". It wraps ErrGroupMismatch.
type GroupMismatchError struct {
	Group, Field, Have, Want string
}

func (e *GroupMismatchError) Error() string {
	return fmt.Sprintf("lock: group %q: %s is %q in the lock table but the caller has %q", e.Group, e.Field, e.Have, e.Want)
}

// Unwrap returns ErrGroupMismatch.
func (e *GroupMismatchError) Unwrap() error { return ErrGroupMismatch }

// ConfigError names an invalid option, argument or configuration field. It is [configerr.Error],
// the one shape of configuration error in dynapart (scan.ConfigError and worker.ConfigError are
// aliases of it too), so errors.As(err, &ce) with a *lock.ConfigError (or any alias) catches any
// of them.
type ConfigError = configerr.Error

func bad(field, format string, args ...any) error {
	return &ConfigError{Pkg: "lock", Field: field, Reason: fmt.Sprintf(format, args...)}
}

// tableErr turns ResourceNotFoundException into *TableError, so callers learn which table is
// wrong instead of reading an opaque service error.
func (c *Client) tableErr(err error) error {
	if isValidation(err) {
		return err // on a write it may be the item (a checkpoint over 400 KB), not the table
	}
	return classifyTableErr(c.table, err)
}

// readErr is tableErr for the reads: a ValidationException on a read by pk (and sk) can only mean
// the table is keyed differently, and every operation starts with a read.
func (c *Client) readErr(err error) error { return classifyTableErr(c.table, err) }

func classifyTableErr(table string, err error) error {
	if err == nil {
		return nil
	}
	var te *TableError
	if errors.As(err, &te) {
		return err
	}
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return &TableError{Table: table, Problem: "table does not exist", Err: err}
	}
	if isValidation(err) {
		return &TableError{Table: table, Problem: "key schema does not match (want pk S hash, sk N range)", Err: err}
	}
	return err
}

func isValidation(err error) bool {
	var api interface{ ErrorCode() string }
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
}

func conditionFailed(err error) (*types.ConditionalCheckFailedException, bool) {
	var cf *types.ConditionalCheckFailedException
	ok := errors.As(err, &cf)
	return cf, ok
}

// Retryable reports whether waiting may cure err: an outage of DynamoDB (a restart, a dropped
// connection, throttling or server errors beyond the SDK's retries) rather than something no
// retry changes (a wrong setting, group or table, refused credentials, a cancelled context).
// A hot standby retries such errors for as long as it waits; so does a worker reading its tables
// at start.
func Retryable(err error) bool {
	var ce *ConfigError
	var te *TableError
	if err == nil || errors.As(err, &ce) || errors.As(err, &te) || errors.Is(err, ErrGroupMismatch) ||
		errors.Is(err, ErrGroupFinished) || errors.Is(err, ErrGroupNotFound) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
			"MissingAuthenticationToken", "MissingAuthenticationTokenException", "ValidationException",
			"ResourceNotFoundException", "ExpiredTokenException":
			return false
		}
	}
	return true
}
