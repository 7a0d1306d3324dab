package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// verify, failed and redrive read the ledger their flags name, by default the inline ledger of job
// "default". A job run with other ledger flags (--ledger table, --job j1) keeps its state
// elsewhere, and their answer, every item pending or no dead letter, would be a wrong picture.
// When their answer comes back empty they look for the groups of the table in the lease table:
// groups that all record another ledger, and a ledger that holds no state for any item, make the
// answer a usage error (exit 2) naming the flags the groups record.

// LedgerUsedHelp is the paragraph of --help that says what Unused does, for a command that calls
// it when what.
func LedgerUsedHelp(what string) string {
	return `The ledger read is the one the flags name (default: the inline ledger), not necessarily the one
the table's jobs used. When ` + what + `,
the lease table (--lease-table) is read for the groups of --table: if there are some, none records
this ledger (--ledger, and --job and --ledger-table, or --attr-prefix) and no item has state in it,
no job of the table used it: exit 2, naming the flags the groups record (e.g. --ledger table
--job j1 --ledger-table dynapart-ledger).`
}

// AddLeaseTable defines --lease-table, where Unused looks for the table's groups.
func (l *LedgerFlags) AddLeaseTable(f *pflag.FlagSet) {
	f.StringVar(&l.LeaseTable, "lease-table", worker.DefaultLeaseTable,
		"lease table whose groups tell which ledger and job the table's workers used (read when the ledger shows no state)")
}

// Unused returns a usage error naming the flags to give when the ledger led (of l) is one no job
// of the table used: the lease table has groups for the table, none records this ledger, and it
// holds no state for any item of the table (sum; read with Summarize when nil). Otherwise, also
// when the lease table cannot be read, it returns nil.
func (l *LedgerFlags) Unused(ctx context.Context, g *Globals, led worker.Ledger, sum *worker.Summary) error {
	db, err := g.DynamoClient(ctx)
	if err != nil || l.ownGroupRecords(ctx, db) {
		return nil
	}
	groups, err := TableGroups(ctx, db, l.LeaseTable, l.Table)
	if err != nil || len(groups) == 0 {
		return nil
	}
	for _, gr := range groups {
		if sameLedger(*l, gr.Ledger) {
			return nil
		}
	}
	if sum == nil {
		s, err := led.Summarize(ctx)
		if err != nil {
			return err
		}
		sum = &s
	}
	if sum.Total == 0 || sum.Done+sum.Claimed+sum.Failed > 0 {
		return nil
	}
	return Usagef("no job of %q used the ledger read (%s): none of its %s has state there, and the groups of %q in "+
		"lease table %q record another: %s; give those flags (--lease-table names another lease table)",
		l.Table, l.Args(), Count(sum.Total, "item"), l.Table, l.LeaseTable, recordedText(groups, *l))
}

// ownGroupRecords reports whether the group work gives the job by default (TABLE/JOB) records the
// ledger l names: one GetItem settles the usual case, where the scan of the lease table for every
// group of the table (its cost grows with the table's history: helper-81) is not needed.
func (l *LedgerFlags) ownGroupRecords(ctx context.Context, db lock.DynamoDBClient) bool {
	lc, err := lock.New(db, l.LeaseTable)
	if err != nil {
		return false
	}
	st, err := lc.GroupState(ctx, l.Table+"/"+l.Job)
	if err != nil {
		return false
	}
	rec, _, ok := RecordedLedger(st.Meta)
	return ok && rec.Table == l.Table && sameLedger(*l, rec)
}

// sameLedger reports whether a and b name the same item state: the same kind, and the same job
// and ledger table (table ledger) or attribute prefix (inline ledger, whose state has no job).
func sameLedger(a, b LedgerFlags) bool {
	if a.Kind != b.Kind {
		return false
	}
	if a.Kind == string(worker.LedgerTable) {
		return a.Job == b.Job && a.LedgerTable == b.LedgerTable
	}
	return a.Prefix == b.Prefix
}

// Args are the flags that name l's ledger (not its table) to verify, failed and redrive.
func (l LedgerFlags) Args() string {
	if l.Kind == string(worker.LedgerTable) {
		return "--ledger table --job " + l.Job + " --ledger-table " + l.LedgerTable
	}
	if l.Prefix != worker.DefaultAttrPrefix {
		return "--ledger inline --attr-prefix " + l.Prefix
	}
	return "--ledger inline"
}

// argsBeside are the flags that name l's ledger to someone who read the ledger read names: Args,
// and the attribute prefix also when it is the default and read names another, since the flags to
// give must undo that --attr-prefix (helper-83: "--ledger inline" alone, for a read with
// --attr-prefix xx_ of a group recording dp_, answered the same exit 2 again).
func (l LedgerFlags) argsBeside(read LedgerFlags) string {
	if l.Kind != string(worker.LedgerTable) && l.Prefix != read.Prefix {
		return "--ledger inline --attr-prefix " + l.Prefix
	}
	return l.Args()
}

// recordedText lists the groups by the ledger flags they record, as the reader of read gives them:
// `group "a", "b": --ledger ...`.
func recordedText(groups []TableGroup, read LedgerFlags) string {
	var order []string
	names := map[string][]string{}
	for _, gr := range groups {
		args := gr.Ledger.argsBeside(read)
		if names[args] == nil {
			order = append(order, args)
		}
		names[args] = append(names[args], fmt.Sprintf("%q", gr.Name))
	}
	parts := make([]string, len(order))
	for i, args := range order {
		noun := "group"
		if len(names[args]) > 1 {
			noun = "groups"
		}
		parts[i] = fmt.Sprintf("%s %s: %s", noun, strings.Join(names[args], ", "), args)
	}
	return strings.Join(parts, "; ")
}
