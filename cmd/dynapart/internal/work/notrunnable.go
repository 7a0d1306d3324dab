package work

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// notRunnableError is a CMD that /bin/sh could not run: exit 127 (command not found) or 126
// (found, not executable). That is the operator's --exec, not the item: counted as a failed
// attempt, a misspelt CMD would use up every item's attempts and dead-letter the whole table.
// It stops the run instead (as SIGTERM does: the attempts in flight are given back, not counted)
// and the worker exits 2.
type notRunnableError struct {
	Code int
	Tail string // the tail of CMD's stderr: the shell's "not found" or "Permission denied"
}

func (e *notRunnableError) Error() string {
	why := "the shell did not find the command"
	if e.Code == 126 {
		why = "the command is not executable"
	}
	return withTail(fmt.Sprintf("CMD could not run (exit %d: %s)", e.Code, why), e.Tail)
}

// notRunnable is the notRunnableError of a CMD that exited 126 or 127, else nil.
func notRunnable(exitErr *exec.ExitError, tail string) error {
	if code := exitErr.ExitCode(); code == 126 || code == 127 {
		return &notRunnableError{Code: code, Tail: tail}
	}
	return nil
}

// stopIfNotRunnable stops the run when err is a CMD that could not run, and returns the handler's
// ErrStopped for it, so that its attempt is not counted; any other err is returned as it is.
func stopIfNotRunnable(stop context.CancelCauseFunc, err error) error {
	var nr *notRunnableError
	if !errors.As(err, &nr) {
		return err
	}
	stop(nr)
	return fmt.Errorf("%w: %w", worker.ErrStopped, nr)
}

// notRunnableExit is the error of a run stopped by a notRunnableError (its cause): exit 2.
func notRunnableExit(cause error) error {
	return &cli.UsageError{Err: fmt.Errorf("--exec: %w; the worker stopped and gave back the attempts in flight, "+
		"not counted: fix --exec (the command line is run by /bin/sh -c) and start it again", cause)}
}
