package follow

import (
	"context"
	"errors"
	"fmt"

	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/dynapart/dynapart/lock"
)

var (
	// ErrTrimmed says the stream no longer holds records the group has not handled: a shard's
	// checkpoint is older than the stream's retention (24 hours on DynamoDB), or the stream itself
	// ended (disabled, deleted). Reading on would skip writes without a trace, so Run stops; the
	// caller must rescan the table. Run returns it wrapped in a *TrimmedError.
	ErrTrimmed = errors.New("follow: the stream lost records not yet read")
	// ErrRunTwice is returned by a Run called while another Run of the same Reader is running.
	ErrRunTwice = errors.New("follow: the Reader is already running")
)

// TrimmedError says where records were lost. It wraps ErrTrimmed and the service's error.
type TrimmedError struct {
	// Shard is the shard whose checkpoint is gone; "" when the whole stream ended.
	Shard string
	// Checkpoint is the sequence number the shard's reading was to resume after.
	Checkpoint string
	// Reason says what showed the loss, e.g. "the stream is DISABLED".
	Reason string
	// Err is the service's error behind it, if any (a TrimmedDataAccessException, ...).
	Err error
}

func (e *TrimmedError) Error() string {
	msg := "follow: " + e.Reason
	if e.Shard != "" {
		msg = fmt.Sprintf("follow: shard %s, checkpoint %q: %s", e.Shard, e.Checkpoint, e.Reason)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + " (records lost: rescan the table)"
}

// Unwrap returns ErrTrimmed and the service's error.
func (e *TrimmedError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrTrimmed}
	}
	return []error{ErrTrimmed, e.Err}
}

// errStop ends the reading of one shard without ending the Run: its lease was lost or released,
// or the Run is ending.
var errStop = errors.New("follow: shard reading stopped")

// The service errors the reader tells apart. Every other error is transient (waiting may cure
// it) or not by the rule of lock.Retryable, which knows the AWS codes no retry cures.

func isExpired(err error) bool {
	var e *stypes.ExpiredIteratorException
	return errors.As(err, &e)
}

func isTrimmed(err error) bool {
	var e *stypes.TrimmedDataAccessException
	return errors.As(err, &e)
}

func isNotFound(err error) bool {
	var e *stypes.ResourceNotFoundException
	return errors.As(err, &e)
}

// transient reports whether waiting may cure err: throttling, a dropped connection, DynamoDB
// restarting, a server error beyond the SDK's retries. Lost records and a shard's stop are not.
func transient(err error) bool {
	return !errors.Is(err, ErrTrimmed) && !errors.Is(err, errStop) && lock.Retryable(err)
}

// isCancel reports whether err is a context's end rather than a failure.
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
