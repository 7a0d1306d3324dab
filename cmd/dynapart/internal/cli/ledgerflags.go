package cli

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/worker"
)

// LedgerFlags select a ledger the way `work` does.
type LedgerFlags struct {
	Table, Job, Kind, LedgerTable, Prefix string
	// LeaseTable is where verify, failed and redrive look for the groups of Table (AddLeaseTable).
	LeaseTable string
}

// Add defines --table, --job, --ledger, --ledger-table and --attr-prefix.
func (l *LedgerFlags) Add(f *pflag.FlagSet) {
	f.StringVar(&l.Table, "table", "", "source table (required)")
	f.StringVar(&l.Job, "job", "default", "job name (table ledger: the job whose state to read)")
	f.StringVar(&l.Kind, "ledger", "inline", "ledger: inline (state on the items) or table (a separate ledger table)")
	f.StringVar(&l.LedgerTable, "ledger-table", worker.DefaultLedgerTable, "ledger table, for --ledger table")
	f.StringVar(&l.Prefix, "attr-prefix", worker.DefaultAttrPrefix, "inline ledger attribute prefix")
}

// RunE is the RunE of a command that reads the ledger: run with the ledger open.
func (l *LedgerFlags) RunE(g *Globals, run func(context.Context, *cobra.Command, worker.Ledger) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		led, err := l.Open(cmd.Context(), g)
		if err != nil {
			return err
		}
		return run(cmd.Context(), cmd, led)
	}
}

// Open opens the ledger of the flags, checking that its tables exist.
func (l *LedgerFlags) Open(ctx context.Context, g *Globals) (worker.Ledger, error) {
	return l.OpenVia(ctx, g, nil)
}

// OpenVia is Open with the ledger's DynamoDB calls sent through wrap (status meters them); nil
// wrap sends them directly.
func (l *LedgerFlags) OpenVia(ctx context.Context, g *Globals, wrap func(worker.LedgerClient) worker.LedgerClient) (worker.Ledger, error) {
	if l.Table == "" {
		return nil, Usagef("--table is required")
	}
	if l.Kind != "inline" && l.Kind != "table" {
		return nil, Usagef("--ledger %q: want inline or table", l.Kind)
	}
	db, t, err := g.DescribeSource(ctx, l.Table)
	if err != nil {
		return nil, err
	}
	keys := TableSchema(t).Names()
	var client worker.LedgerClient = db
	if wrap != nil {
		client = wrap(db)
	}
	if l.Kind == "table" {
		lt, err := Describe(ctx, db, l.LedgerTable)
		if err != nil {
			return nil, err
		}
		if lt == nil {
			return nil, Usagef("--ledger-table %q: table does not exist", l.LedgerTable)
		}
		return worker.NewTableLedger(client, l.LedgerTable, l.Job, l.Table, keys)
	}
	return worker.NewInlineLedger(client, l.Table, keys, worker.InlineOptions{Prefix: l.Prefix})
}
