package work

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// flagOfField is the `work` flag of a worker.Config field ("--lease-ttl" for LeaseTTL), or ""
// when it has none.
func flagOfField(field string) string {
	for _, s := range worker.Settings() {
		if s.Field == field && s.Flag != "" {
			return "--" + s.Flag
		}
	}
	return ""
}

// flagOfMismatch is the `work` flag of the setting a group refused a worker on, by the Field of
// the *lock.GroupMismatchError (--workers for n, --attr-prefix for meta.attr_prefix).
func flagOfMismatch(field string) string {
	for _, s := range worker.Settings() {
		if s.GroupField == field && s.Flag != "" {
			return "--" + s.Flag
		}
	}
	return "--" + strings.ReplaceAll(strings.TrimPrefix(field, "meta."), "_", "-")
}

// configFlagError is a worker.Config field the library refused, named by its flag: a usage error
// (exit 2, nothing written).
type configFlagError struct {
	Flag string // "" when the field has no flag
	err  *worker.ConfigError
}

func (e *configFlagError) Error() string {
	if e.Flag == "" {
		return e.err.Error()
	}
	return fmt.Sprintf("%s: %s (worker.Config.%s)", e.Flag, flagsInReason(e.err.Reason), e.err.Field)
}

// flagsInReason is a ConfigError's reason with the other Config fields it names written as their
// flags ("cannot be combined with CompleteOnly" says --complete-only), unless it names flags itself.
func flagsInReason(reason string) string {
	if strings.Contains(reason, "--") {
		return reason
	}
	return configField.ReplaceAllStringFunc(reason, func(field string) string {
		if f := flagOfField(field); f != "" {
			return f
		}
		return field
	})
}

// configField is a word that may be a Config field's name.
var configField = regexp.MustCompile(`\b[A-Z][A-Za-z]+\b`)

func (e *configFlagError) Unwrap() error { return e.err }

// groupMismatchError is a worker refused by its group: a usage error (exit 2, nothing written)
// whose message names the flag that differs.
type groupMismatchError struct {
	Flag string
	err  *lock.GroupMismatchError
}

func (e *groupMismatchError) Error() string {
	if e.err.Field == "n" {
		return fmt.Sprintf("%s %s differs from group %q, which has %s slots: leave --workers out to join the group "+
			"at its size, or change the size with 'dynapart scale --group %s --workers %s'", e.Flag, e.err.Want,
			e.err.Group, e.err.Have, e.err.Group, e.err.Want)
	}
	msg := fmt.Sprintf("%s %q differs from group %q, which was set up with %q: every worker of a group must "+
		"agree on it (use a new --group to change it)", e.Flag, e.err.Want, e.err.Group, e.err.Have)
	if e.Flag == "--versions" {
		msg += "; --follow sets --versions too, so a group a follower set up is joined with --follow or --versions"
	}
	return msg
}

func (e *groupMismatchError) Unwrap() error { return e.err }

// explainSetting names the flag of a worker setting in err: a *worker.ConfigError becomes a
// configFlagError, a *lock.GroupMismatchError a groupMismatchError; other errors are returned as
// they are.
func explainSetting(err error) error {
	var ce *worker.ConfigError
	if errors.As(err, &ce) {
		return &configFlagError{Flag: flagOfField(ce.Field), err: ce}
	}
	return explainMismatch(err)
}

// explainMismatch turns a *lock.GroupMismatchError into a groupMismatchError naming the flag;
// other errors are returned as they are.
func explainMismatch(err error) error {
	var gm *lock.GroupMismatchError
	if !errors.As(err, &gm) {
		return err
	}
	return &groupMismatchError{Flag: flagOfMismatch(gm.Field), err: gm}
}
