package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// Exit codes of the CLI contract.
const (
	ExitOK      = 0
	ExitRuntime = 1
	ExitUsage   = 2
)

// UsageError is bad usage or invalid configuration: exit 2, nothing written.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// Usagef is a usage error (exit 2) with a formatted message.
func Usagef(format string, args ...any) error { return &UsageError{fmt.Errorf(format, args...)} }

// UsageArgs types the error of a cobra Args validator (cobra.NoArgs...) as a usage error.
func UsageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &UsageError{err}
		}
		return nil
	}
}

// ExitError ends the program with a code and an optional message (verify's "not all done").
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// IsUsage reports whether err is bad usage or invalid configuration (exit 2), by its type.
func IsUsage(err error) bool {
	var ue *UsageError
	var ce *worker.ConfigError
	var te *lock.TableError
	return errors.As(err, &ue) || errors.As(err, &ce) || errors.As(err, &te) || errors.Is(err, lock.ErrGroupMismatch) ||
		lock.IsBudgetBelowUsage(err)
}

// GroupNotFound is the usage error of a command on a group the lease table does not hold
// (lock.ErrGroupNotFound).
func GroupNotFound(group, leaseTable string) error {
	return &UsageError{fmt.Errorf("group %q does not exist in %q (nothing written): check --group and --lease-table; "+
		"a group exists once a 'dynapart work' of it has started: %w", group, leaseTable, lock.ErrGroupNotFound)}
}
