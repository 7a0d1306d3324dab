// Package seed is `dynapart seed`: demo items, also for the demo (Job).
package seed

import (
	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// New is `dynapart seed`.
func New(g *cli.Globals) *cobra.Command {
	var a seedArgs
	cmd := &cobra.Command{
		Use:   "seed",
		Short: "Write N demo items into a table, with progress",
		Long: `Writes --items demo items with keys --start .. --start+items-1 (creating the table with --key
and --sort-key if it does not exist; an existing table keeps its own key schema, and seed writes
the keys it has). Keys: S "item-00000042", N 42, B the 8-byte big-endian number; a sort key gets
the same value as the partition key. Each item
has n (N), payload (S, --payload-bytes long) and grp (S, one of 10 groups).

An item whose key exists is left as it is, its content and its ledger state (a processed item stays
done): each item is one PutItem conditioned on its key not existing, --parallel requests in
flight, and seed prints how many items already existed besides how many it wrote. --overwrite
replaces existing items instead, their ledger state too (they are pending again), with
BatchWriteItem, 25 items a request; a table that is empty when seed starts (one seed creates, or
one init just created) is written that way too (it has nothing to replace). Unprocessed items are
retried.`,
		Example: `  dynapart seed --table users --items 20000
  dynapart seed --table users --start 20000 --items 500     # 500 more items
  dynapart seed --table users --items 20000 --overwrite     # back to fresh, unprocessed items
  dynapart seed --table files --items 1000000 --key file_id:N --payload-bytes 400`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.run(cmd, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&a.table, "table", "", "table to write (required)")
	a.sf.Add(f)
	f.IntVar(&a.items, "items", 1000, "number of items")
	f.IntVar(&a.start, "start", 0, "first key number")
	f.IntVar(&a.payload, "payload-bytes", 100, "size of each item's payload attribute")
	f.IntVar(&a.parallel, "parallel", 8, "write requests in flight")
	f.BoolVar(&a.overwrite, "overwrite", false, "replace items that exist, content and ledger state (default: leave them as they are)")
	return cmd
}

// seedArgs are seed's flags.
type seedArgs struct {
	table                           string
	sf                              cli.SchemaFlags
	items, start, payload, parallel int
	overwrite                       bool
}

// run checks the flags, makes the table if it is missing, and writes the items.
func (a *seedArgs) run(cmd *cobra.Command, g *cli.Globals) error {
	if a.table == "" {
		return cli.Usagef("--table is required")
	}
	if a.items < 0 || a.start < 0 || a.payload < 0 {
		return cli.Usagef("--items, --start and --payload-bytes must not be negative")
	}
	if a.parallel < 1 {
		return cli.Usagef("--parallel must be at least 1, got %d", a.parallel)
	}
	src, err := a.sf.Source(cmd.Flags(), a.table)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	db, schema, created, err := g.EnsureSource(ctx, src)
	if err != nil {
		return err
	}
	empty := created
	if !a.overwrite && !created {
		if empty, err = tableEmpty(ctx, db, a.table); err != nil {
			return err
		}
	}
	job := Job{DB: db, Table: a.table, Schema: schema, start: a.start, Items: a.items, PayloadBytes: a.payload,
		Parallel: a.parallel, Overwrite: a.overwrite || empty}
	return job.Run(ctx, cmd.ErrOrStderr())
}
