// Package verify is `dynapart verify` and `dynapart failed`: the ledger's counts and dead letters.
package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// New is `dynapart verify`.
func New(g *cli.Globals) *cobra.Command {
	var lf cli.LedgerFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Count items by state; exit 0 only when every item is done",
		Long: `Reads the whole source table (and the ledger table for --ledger table) and counts items by
state: done, pending (never claimed, or waiting for a retry), claimed (in flight) and failed
(dead-lettered). Exits 0 only when every item is done, 1 otherwise.

Only items that exist in the source table count. With --ledger table, rows of items deleted from
the source since are reported as orphaned (and in --json as "orphaned" when there are any).

--json prints {"total":..,"done":..,"pending":..,"claimed":..,"failed":..}.

` + cli.LedgerUsedHelp("no item is done, claimed or failed"),
		Example: `  dynapart verify --table users
  dynapart verify --table users --ledger table --job campaign-42 --json`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: lf.RunE(g, func(ctx context.Context, cmd *cobra.Command, l worker.Ledger) error {
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
			if s.Done+s.Claimed+s.Failed == 0 {
				if err := lf.Unused(ctx, g, l, &s); err != nil {
					return err
				}
			}
			if s.Done != s.Total {
				return &cli.ExitError{Code: cli.ExitRuntime, Msg: notDone(s.Total-s.Done, s.Total)}
			}
			return nil
		}),
	}
	lf.Add(cmd.Flags())
	lf.AddLeaseTable(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

// NewFailed is `dynapart failed`.
func NewFailed(g *cli.Globals) *cobra.Command {
	var lf cli.LedgerFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "failed",
		Short: "List dead-lettered items with their last error",
		Long: `Lists the items that were dead-lettered (after --max-attempts failed attempts, or a permanent
error) with their key, the number of attempts and the last error, one item a line: an error with
a newline, a tab or another character that does not print as itself (or that begins with a
double quote) is written quoted, as a Go string ("line one\nline two"). --json writes it as it is.

` + cli.LedgerUsedHelp("it finds no dead letter"),
		Example: `  dynapart failed --table users
  dynapart failed --table users --ledger table --job campaign-42 --json`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: lf.RunE(g, func(ctx context.Context, cmd *cobra.Command, l worker.Ledger) error {
			n := 0
			enc := json.NewEncoder(cmd.OutOrStdout())
			err := l.DeadLetters(ctx, func(d worker.DeadLetter) error {
				n++
				key, kerr := cli.PlainJSON(d.Key)
				if kerr != nil {
					return kerr
				}
				if asJSON {
					return enc.Encode(map[string]any{"key": json.RawMessage(key), "attempts": d.Attempts, "error": d.Error, "at": d.At})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\tattempts=%d\tat=%s\t%s\n", key, d.Attempts, d.At.Format(time.RFC3339), cli.OneLine(d.Error))
				return nil
			})
			if err != nil {
				return err
			}
			if !asJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s\n", cli.Count(n, "failed item"))
			}
			if n == 0 {
				return lf.Unused(ctx, g, l, nil)
			}
			return nil
		}),
	}
	lf.Add(cmd.Flags())
	lf.AddLeaseTable(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line")
	return cmd
}

// notDone is verify's error: "1 of 3 items is not done", "2 of 3 items are not done".
func notDone(left, total int64) string {
	verb := "are"
	if left == 1 {
		verb = "is"
	}
	return fmt.Sprintf("%d of %s %s not done", left, cli.Count(total, "item"), verb)
}
