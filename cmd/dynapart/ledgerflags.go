package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/worker"
)

// ledgerFlags select a ledger the way `work` does.
type ledgerFlags struct {
	table, job, kind, ledgerTable, prefix string
}

func (l *ledgerFlags) add(f *pflag.FlagSet) {
	f.StringVar(&l.table, "table", "", "source table (required)")
	f.StringVar(&l.job, "job", "default", "job name (table ledger: the job whose state to read)")
	f.StringVar(&l.kind, "ledger", "inline", "ledger: inline (state on the items) or table (a separate ledger table)")
	f.StringVar(&l.ledgerTable, "ledger-table", worker.DefaultLedgerTable, "ledger table, for --ledger table")
	f.StringVar(&l.prefix, "attr-prefix", worker.DefaultAttrPrefix, "inline ledger attribute prefix")
}

// runE is the RunE of a command that reads the ledger: run with the ledger open.
func (l *ledgerFlags) runE(g *globals, run func(context.Context, *cobra.Command, worker.Ledger) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		led, err := l.open(cmd.Context(), g)
		if err != nil {
			return err
		}
		return run(cmd.Context(), cmd, led)
	}
}

// open opens the ledger of the flags, checking that its tables exist.
func (l *ledgerFlags) open(ctx context.Context, g *globals) (worker.Ledger, error) {
	if l.table == "" {
		return nil, usagef("--table is required")
	}
	if l.kind != "inline" && l.kind != "table" {
		return nil, usagef("--ledger %q: want inline or table", l.kind)
	}
	db, t, err := g.describeSource(ctx, l.table)
	if err != nil {
		return nil, err
	}
	keys := tableSchema(t).names()
	if l.kind == "table" {
		lt, err := describe(ctx, db, l.ledgerTable)
		if err != nil {
			return nil, err
		}
		if lt == nil {
			return nil, usagef("--ledger-table %q: table does not exist", l.ledgerTable)
		}
		return worker.NewTableLedger(db, l.ledgerTable, l.job, l.table, keys)
	}
	return worker.NewInlineLedger(db, l.table, keys, worker.InlineOptions{Prefix: l.prefix})
}
