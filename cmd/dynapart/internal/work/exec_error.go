package work

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/dynapart/dynapart/worker"
)

// execError is a failed run's error: the exit status and the tail of stderr (msg); exit 65 is
// permanent. A run its context ended (ctx: --exec-timeout, the claim's end, the worker's stop)
// is a *killedError that says which, rather than only "signal: killed", which the OOM killer
// would give too.
func execError(ctx context.Context, err error, msg string) error {
	var exitErr *exec.ExitError
	exited := errors.As(err, &exitErr) && exitErr.ExitCode() >= 0 // not by a signal
	if ctx.Err() != nil && !exited {
		return &killedError{Cause: context.Cause(ctx), How: withTail(err.Error(), msg)}
	}
	if exitErr == nil {
		return fmt.Errorf("exec: %w", err)
	}
	if err := notRunnable(exitErr, msg); err != nil {
		return err
	}
	if exitErr.ExitCode() == 65 {
		return worker.Permanent(errors.New(withTail(exitErr.Error(), msg)))
	}
	return errors.New(withTail(exitErr.Error(), msg))
}

// withTail is a run's status followed by the tail of its stderr, if any.
func withTail(status, tail string) string {
	if tail == "" {
		return status
	}
	return status + ": " + tail
}

// killedError is a run of CMD killed as its context ended: Cause is the context's cause, How the
// run's own end (its status and the tail of its stderr).
type killedError struct {
	Cause error
	How   string
}

func (e *killedError) Error() string {
	var timeout *execTimeoutError
	why := "as its context ended: " + e.Cause.Error() // the lease lost, or Run's context
	switch {
	case errors.As(e.Cause, &timeout):
		why = fmt.Sprintf("after --exec-timeout %v", timeout.After)
	case errors.Is(e.Cause, worker.ErrClaimExpiring):
		why = "as its claim was about to expire (--claim-ttl)"
	case errors.Is(e.Cause, worker.ErrStopped):
		why = "as the worker stopped (--drain-timeout passed)"
	}
	return "CMD killed " + why + " (" + e.How + ")"
}

func (e *killedError) Unwrap() error { return e.Cause }

// execTimeoutError is the cause of a run ended by --exec-timeout.
type execTimeoutError struct{ After time.Duration }

func (e *execTimeoutError) Error() string { return fmt.Sprintf("--exec-timeout %v passed", e.After) }
