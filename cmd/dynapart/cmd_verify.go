package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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

func newVerifyCmd(g *globals) *cobra.Command {
	var lf ledgerFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Count items by state; exit 0 only when every item is done",
		Long: `Reads the whole source table (and the ledger table for --ledger table) and counts items by
state: done, pending (never claimed, or waiting for a retry), claimed (in flight) and failed
(dead-lettered). Exits 0 only when every item is done, 1 otherwise.

Only items that exist in the source table count. With --ledger table, rows of items deleted from
the source since are reported as orphaned (and in --json as "orphaned" when there are any).

--json prints {"total":..,"done":..,"pending":..,"claimed":..,"failed":..}.`,
		Example: `  dynapart verify --table users
  dynapart verify --table users --ledger table --job campaign-42 --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: lf.runE(g, func(ctx context.Context, cmd *cobra.Command, l worker.Ledger) error {
			s, err := l.Summarize(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(s); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "total %d  done %d  pending %d  claimed %d  failed %d\n", s.Total, s.Done, s.Pending, s.Claimed, s.Failed)
				if s.Orphaned > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "orphaned %d (ledger rows of items no longer in the source table, not counted)\n", s.Orphaned)
				}
			}
			if s.Done != s.Total {
				return &exitError{code: exitRuntime, msg: fmt.Sprintf("%d of %d items are not done", s.Total-s.Done, s.Total)}
			}
			return nil
		}),
	}
	lf.add(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

func newFailedCmd(g *globals) *cobra.Command {
	var lf ledgerFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "failed",
		Short: "List dead-lettered items with their last error",
		Long: `Lists the items that were dead-lettered (after --max-attempts failed attempts, or a permanent
error) with their key, the number of attempts and the last error.`,
		Example: `  dynapart failed --table users
  dynapart failed --table users --ledger table --job campaign-42 --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: lf.runE(g, func(ctx context.Context, cmd *cobra.Command, l worker.Ledger) error {
			n := 0
			enc := json.NewEncoder(cmd.OutOrStdout())
			err := l.DeadLetters(ctx, func(d worker.DeadLetter) error {
				n++
				key, kerr := plainJSON(d.Key)
				if kerr != nil {
					return kerr
				}
				if asJSON {
					return enc.Encode(map[string]any{"key": json.RawMessage(key), "attempts": d.Attempts, "error": d.Error, "at": d.At})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\tattempts=%d\tat=%s\t%s\n", key, d.Attempts, d.At.Format(time.RFC3339), d.Error)
				return nil
			})
			if err != nil {
				return err
			}
			if !asJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d failed items\n", n)
			}
			return nil
		}),
	}
	lf.add(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line")
	return cmd
}
