// Package initcmd is `dynapart init` (a package cannot be named init).
package initcmd

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// initLong is init --help's description.
const initLong = `Creates what dynapart needs and is not there yet (safe to run again):

  - the source table --table with partition key --key (and sort key --sort-key, when given;
    on-demand billing), unless it exists. An existing table is taken with the key schema it has
    (partition and sort key, any of S, N, B): --key and --sort-key matter only when creating,
    and when given for an existing table that has another schema, init stops with exit 2;
  - the lease table --lease-table (pk S, sk N) that holds the slots;
  - the ledger table --ledger-table, when given, for --ledger table jobs;
  - with --index, the sparse pending index of index mode on the source table (an item is in it
    once its writer sets --shard-attr to the item's shard: scan.MarkPending in Go, or the number
    'dynapart partition --workers SHARDS KEY' prints; nothing init or seed writes does);
  - with --stream, the source table's stream (NEW_AND_OLD_IMAGES), on an existing table too; a
    table whose stream has another view type is named and init stops with exit 2 (the view type
    of a stream cannot be changed in place). Turn it on before the first pass of work --follow
    (or of a back-fill with --versions whose changes a Lambda stream handler follows).`

// New is `dynapart init`.
func New(g *cli.Globals) *cobra.Command {
	var table, leaseTable, ledgerTable, indexName, shardAttr string
	var index, stream bool
	var sf cli.SchemaFlags
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the missing tables: source, lease, and (optionally) ledger and pending index",
		Long:  initLong,
		Example: `  dynapart init --table users --key id:S
  dynapart init --table files --key file_id:N --index
  dynapart init --table events --key pk:B --sort-key ts:N
  dynapart init --table their-own-table                 # any existing table, its key as it is
  dynapart init --table users --ledger-table dynapart-ledger
  dynapart init --table users --stream`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if table == "" {
				return cli.Usagef("--table is required")
			}
			src, err := sf.Source(cmd.Flags(), table)
			if err != nil {
				return err
			}
			if leaseTable == table || (ledgerTable != "" && ledgerTable == table) {
				return cli.Usagef("--lease-table and --ledger-table must differ from --table %q", table)
			}
			ctx := cmd.Context()
			db, schema, created, err := g.EnsureSource(ctx, src)
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			report(stderr, created, "table", table)
			fmt.Fprintf(stderr, "table %q key: %s\n", table, schema)
			if err := lock.CreateTable(ctx, db, leaseTable); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "lease table %q ready\n", leaseTable)
			if ledgerTable != "" {
				if err := worker.CreateLedgerTable(ctx, db, ledgerTable); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "ledger table %q ready\n", ledgerTable)
			}
			if index {
				if err := scan.CreatePendingIndex(ctx, db, table, indexName, shardAttr); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "pending index %q (shard attribute %q) ready\n", indexName, shardAttr)
			}
			if stream {
				return enableStream(ctx, db, table, stderr)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&table, "table", "", "source table (required)")
	sf.Add(f)
	f.StringVar(&leaseTable, "lease-table", worker.DefaultLeaseTable, "lease table")
	f.StringVar(&ledgerTable, "ledger-table", "", "also create this ledger table (for --ledger table)")
	f.BoolVar(&index, "index", false, "also create the sparse pending index for --mode index")
	f.StringVar(&indexName, "index-name", "dp_pending", "name of the pending index")
	f.StringVar(&shardAttr, "shard-attr", "dp_shard", "shard attribute the pending index is keyed by")
	f.BoolVar(&stream, "stream", false, "also turn on the source table's stream (NEW_AND_OLD_IMAGES)")
	return cmd
}

// enableStream turns on the table's stream (follow.EnableStream) and says so on w.
func enableStream(ctx context.Context, db follow.TableClient, table string, w io.Writer) error {
	arn, changed, err := follow.EnableStream(ctx, db, table)
	if err != nil {
		return err
	}
	verb := "was on"
	if changed {
		verb = "turned on"
	}
	fmt.Fprintf(w, "stream of table %q %s (%s): %s\n", table, verb, follow.ViewType, arn)
	return nil
}

// report says on w whether a table was created or existed.
func report(w io.Writer, created bool, what, name string) {
	if created {
		fmt.Fprintf(w, "%s %q created\n", what, name)
	} else {
		fmt.Fprintf(w, "%s %q exists\n", what, name)
	}
}
