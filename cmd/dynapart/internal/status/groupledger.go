package status

import (
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// Where a group's item state lives (its source table, ledger, job, ledger table, attribute
// prefix) is recorded in its meta item, so status reads it from there: the ledger flags are not
// needed, and one given that disagrees with the group is refused.

// checkLedgerFlags refuses (exit 2) a ledger flag set in f whose value disagrees with the one the
// group's meta records, naming the flag and both values. A flag for a setting that does not
// apply to the group's ledger is not compared.
func checkLedgerFlags(f *pflag.FlagSet, given cli.LedgerFlags, meta map[string]string) error {
	rec, inScope, ok := cli.RecordedLedger(meta)
	if !ok {
		return nil
	}
	want, got := rec.Fields(), given.Fields()
	for _, name := range []string{"table", "ledger", "job", "ledger-table", "attr-prefix"} {
		if f.Changed(name) && inScope[name] && *got[name] != *want[name] {
			return cli.Usagef("--%s %q disagrees with the group, whose meta item records %q: leave --%s out (status reads it from the group)",
				name, *got[name], *want[name], name)
		}
	}
	return nil
}
