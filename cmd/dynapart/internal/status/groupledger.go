package status

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// Where a group's item state lives (its source table, ledger, job, ledger table, attribute
// prefix) is recorded in its meta item, so status reads it from there: the ledger flags are not
// needed, and one given that disagrees with the group is refused.

// ledgerFields are the ledger flags, by flag name, as fields of l.
func ledgerFields(l *cli.LedgerFlags) map[string]*string {
	return map[string]*string{"table": &l.Table, "job": &l.Job, "ledger": &l.Kind, "ledger-table": &l.LedgerTable, "attr-prefix": &l.Prefix}
}

// recordedLedger is the ledger a group's meta item records, each setting by the row of
// worker.Settings with its flag; ok is false when the meta records no table (the group has not
// run). A setting the meta lacks takes its default: it was recorded later, or does not apply to
// the group's ledger (the ledger table of an inline ledger). inScope says whether it applies.
func recordedLedger(meta map[string]string) (l cli.LedgerFlags, inScope map[string]bool, ok bool) {
	if meta["table"] == "" {
		return l, nil, false
	}
	fields := ledgerFields(&l)
	inScope = map[string]bool{}
	for _, s := range worker.Settings() {
		field, isLedger := fields[s.Flag]
		key, recorded := strings.CutPrefix(s.GroupField, "meta.")
		if !isLedger || !recorded {
			continue
		}
		v, has := meta[key]
		if !has && s.Default != nil {
			v = fmt.Sprint(s.Default)
		}
		*field = v
		inScope[s.Flag] = s.Scope.Ledger == "" || string(s.Scope.Ledger) == meta["ledger"]
	}
	return l, inScope, true
}

// checkLedgerFlags refuses (exit 2) a ledger flag set in f whose value disagrees with the one the
// group's meta records, naming the flag and both values. A flag for a setting that does not
// apply to the group's ledger is not compared.
func checkLedgerFlags(f *pflag.FlagSet, given cli.LedgerFlags, meta map[string]string) error {
	rec, inScope, ok := recordedLedger(meta)
	if !ok {
		return nil
	}
	want, got := ledgerFields(&rec), ledgerFields(&given)
	for _, name := range []string{"table", "ledger", "job", "ledger-table", "attr-prefix"} {
		if f.Changed(name) && inScope[name] && *got[name] != *want[name] {
			return cli.Usagef("--%s %q disagrees with the group, whose meta item records %q: leave --%s out (status reads it from the group)",
				name, *got[name], *want[name], name)
		}
	}
	return nil
}
