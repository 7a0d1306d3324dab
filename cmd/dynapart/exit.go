package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// Exit codes of the CLI contract.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// usageError is bad usage or invalid configuration: exit 2, nothing written.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// usageArgs types the error of a cobra Args validator (cobra.NoArgs...) as a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{err}
		}
		return nil
	}
}

// exitError ends the program with a code and an optional message (verify's "not all done").
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// isUsage reports whether err is bad usage or invalid configuration (exit 2), by its type.
func isUsage(err error) bool {
	var ue *usageError
	var ce *worker.ConfigError
	var te *lock.TableError
	return errors.As(err, &ue) || errors.As(err, &ce) || errors.As(err, &te) || errors.Is(err, lock.ErrGroupMismatch)
}
