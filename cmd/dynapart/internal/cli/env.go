package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// EnvName is the environment variable of a flag: DYNAPART_ + upper snake case.
func EnvName(flag string) string {
	return "DYNAPART_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// BindEnv sets every flag not given on the command line from DYNAPART_<FLAG>, but, in a command
// that `work --exec` runs for an item (inExecCMD), not from the variables it sets for CMD
// (ItemEnv): there --key is not read from DYNAPART_KEY, the item's key.
func BindEnv(cmd *cobra.Command, lookupEnv func(string) (string, bool)) error {
	var errs []error
	inCMD := inExecCMD(lookupEnv)
	set := func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" || inCMD && isItemEnv(EnvName(f.Name)) {
			return
		}
		if v, ok := lookupEnv(EnvName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, Usagef("%s=%q (for --%s): %v", EnvName(f.Name), v, f.Name, err))
				return
			}
			f.Changed = true
			if f.Annotations == nil {
				f.Annotations = map[string][]string{}
			}
			f.Annotations[envSource] = []string{EnvName(f.Name)}
		}
	}
	cmd.Flags().VisitAll(set)
	cmd.InheritedFlags().VisitAll(set)
	return errors.Join(errs...)
}

// envSource is the annotation BindEnv puts on a flag it set: the variable it read.
const envSource = "dynapart-env"

// FromEnv is err, a usage error of cmd, with the variables named that set the flags it names: the
// command line does not show them (DYNAPART_MAX_WCU=0 exported for work, which takes 0 as no
// budget, refuses resume). Other errors are returned as they are. The values are not repeated:
// the error shows what it needs, and a variable may hold a secret (--exec's command line).
func FromEnv(cmd *cobra.Command, err error) error {
	if cmd == nil || !IsUsage(err) {
		return err
	}
	msg := err.Error()
	var from []string
	visit := func(f *pflag.Flag) {
		src := f.Annotations[envSource]
		if len(src) == 0 || !namesFlag(msg, f.Name) {
			return
		}
		if note := fmt.Sprintf("--%s from %s", f.Name, src[0]); !slices.Contains(from, note) {
			from = append(from, note)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if len(from) == 0 {
		return err
	}
	return &UsageError{fmt.Errorf("%w (%s)", err, strings.Join(from, ", "))}
}

// namesFlag reports whether msg names --name, not a longer flag it begins (--page-size, not --page).
func namesFlag(msg, name string) bool {
	for rest := msg; ; {
		i := strings.Index(rest, "--"+name)
		if i < 0 {
			return false
		}
		rest = rest[i+2+len(name):]
		if rest == "" || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789-", rune(rest[0])) {
			return true
		}
	}
}
