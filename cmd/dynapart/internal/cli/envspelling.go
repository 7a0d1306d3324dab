package cli

import (
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// maxMisspelling is the most edits (letters added, dropped or changed) that make a variable a
// misspelling of a flag's: DYNAPART_LEASE_TL, DYNAPART_MAX_WCUS. Farther names are taken for
// another program's.
const maxMisspelling = 2

// Misspelt is a DYNAPART_ variable that sets nothing, and the variable of a flag of the command
// run that it is a misspelling of.
type Misspelt struct{ Name, Meant, Flag string }

// MisspeltEnv finds, among environ's variables ("NAME=value"), those named DYNAPART_* that no flag
// of any command reads (nor one 'work --exec' sets for CMD, nor the project's test settings,
// DYNAPART_TEST_*) and that are within maxMisspelling edits of the variable of a flag of cmd: a
// setting misspelt in a task definition would otherwise be left at its default without a word.
func MisspeltEnv(cmd *cobra.Command, environ []string) []Misspelt {
	known := flagEnvNames(cmd.Root())
	var out []Misspelt
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DYNAPART_") || strings.HasPrefix(name, "DYNAPART_TEST_") || known[name] || isItemEnv(name) {
			continue
		}
		if m, ok := nearestFlagEnv(cmd, name); ok {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Misspelt) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// nearestFlagEnv is the flag of cmd whose variable name is nearest to name, when within
// maxMisspelling edits and fewer than half of name's own letters after DYNAPART_.
func nearestFlagEnv(cmd *cobra.Command, name string) (Misspelt, bool) {
	best, bestDist := Misspelt{}, maxMisspelling+1
	visit := func(f *pflag.Flag) {
		env := EnvName(f.Name)
		if d := levenshtein.ComputeDistance(name, env); d < bestDist && 2*d < len(name)-len("DYNAPART_") {
			best, bestDist = Misspelt{Name: name, Meant: env, Flag: "--" + f.Name}, d
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return best, bestDist <= maxMisspelling
}

// flagEnvNames are the variables of every flag of root's commands.
func flagEnvNames(root *cobra.Command) map[string]bool {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		add := func(f *pflag.Flag) { names[EnvName(f.Name)] = true }
		c.Flags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return names
}
