package cli

import (
	"errors"
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
				errs = append(errs, Usagef("%s=%q: %v", EnvName(f.Name), v, err))
				return
			}
			f.Changed = true
		}
	}
	cmd.Flags().VisitAll(set)
	cmd.InheritedFlags().VisitAll(set)
	return errors.Join(errs...)
}
