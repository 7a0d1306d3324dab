package cli

import (
	"fmt"
	"strings"

	"github.com/dynapart/dynapart/worker"
)

// Where a group's item state lives (its source table, ledger, job, ledger table, attribute
// prefix) is recorded in its meta item: status reads it from there, and verify, failed and
// redrive compare it with the ledger they were asked to read (ledgerused.go).

// Fields are the ledger flags, by flag name, as fields of l.
func (l *LedgerFlags) Fields() map[string]*string {
	return map[string]*string{"table": &l.Table, "job": &l.Job, "ledger": &l.Kind, "ledger-table": &l.LedgerTable, "attr-prefix": &l.Prefix}
}

// RecordedLedger is the ledger a group's meta item records, each setting by the row of
// worker.Settings with its flag; ok is false when the meta records no table (the group has not
// run). A setting the meta lacks takes its default: it was recorded later, or does not apply to
// the group's ledger (the ledger table of an inline ledger). inScope says whether it applies.
func RecordedLedger(meta map[string]string) (l LedgerFlags, inScope map[string]bool, ok bool) {
	if meta["table"] == "" {
		return l, nil, false
	}
	fields := l.Fields()
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
