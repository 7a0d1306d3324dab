// Package seed is `dynapart seed`: demo items, also for the demo (Job).
package seed

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// New is `dynapart seed`.
func New(g *cli.Globals) *cobra.Command {
	var table string
	var sf cli.SchemaFlags
	var items, start, payload, parallel int
	cmd := &cobra.Command{
		Use:   "seed",
		Short: "Write N demo items into a table, with progress",
		Long: `Writes --items demo items with keys --start .. --start+items-1 (creating the table with --key
and --sort-key if it does not exist; an existing table keeps its own key schema, and seed writes
the keys it has). Keys: S "item-00000042", N 42, B the 8-byte big-endian number; a sort key gets
the same value as the partition key. Each item
has n (N), payload (S, --payload-bytes long) and grp (S, one of 10 groups).

BatchWriteItem, 25 items a request, --parallel requests in flight; unprocessed items are retried.`,
		Example: `  dynapart seed --table users --items 20000
  dynapart seed --table files --items 1000000 --key file_id:N --payload-bytes 400`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if table == "" {
				return cli.Usagef("--table is required")
			}
			if items < 0 || start < 0 || payload < 0 {
				return cli.Usagef("--items, --start and --payload-bytes must not be negative")
			}
			if parallel < 1 {
				return cli.Usagef("--parallel must be at least 1, got %d", parallel)
			}
			src, err := sf.Source(cmd.Flags(), table)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			db, schema, _, err := g.EnsureSource(ctx, src)
			if err != nil {
				return err
			}
			job := Job{DB: db, Table: table, Schema: schema, start: start, Items: items, PayloadBytes: payload, Parallel: parallel}
			return job.Run(ctx, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&table, "table", "", "table to write (required)")
	sf.Add(f)
	f.IntVar(&items, "items", 1000, "number of items")
	f.IntVar(&start, "start", 0, "first key number")
	f.IntVar(&payload, "payload-bytes", 100, "size of each item's payload attribute")
	f.IntVar(&parallel, "parallel", 8, "BatchWriteItem requests in flight")
	return cmd
}

// demoKey is the key value of item i.
func demoKey(t types.ScalarAttributeType, i int) types.AttributeValue {
	switch t {
	case types.ScalarAttributeTypeN:
		return &types.AttributeValueMemberN{Value: strconv.Itoa(i)}
	case types.ScalarAttributeTypeB:
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, uint64(i))
		return &types.AttributeValueMemberB{Value: b}
	default:
		return &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%08d", i)}
	}
}

// Job writes items start..start+items-1 of demo data into a table.
type Job struct {
	DB                                   *dynamodb.Client
	Table                                string
	Schema                               cli.KeySchema
	start, Items, PayloadBytes, Parallel int
}

// Run writes the items, showing progress on stderr.
func (j Job) Run(ctx context.Context, stderr io.Writer) error {
	db, table, ks, start, items, parallel := j.DB, j.Table, j.Schema, j.start, j.Items, j.Parallel
	payload := strings.Repeat("x", j.PayloadBytes)
	var written atomic.Int64
	batches := make(chan []types.WriteRequest)
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		defer close(batches)
		for lo := start; lo < start+items; lo += 25 {
			hi := min(lo+25, start+items)
			reqs := make([]types.WriteRequest, 0, hi-lo)
			for i := lo; i < hi; i++ {
				item := map[string]types.AttributeValue{
					"n":       &types.AttributeValueMemberN{Value: strconv.Itoa(i)},
					"grp":     &types.AttributeValueMemberS{Value: "g" + strconv.Itoa(i%10)},
					"payload": &types.AttributeValueMemberS{Value: payload},
				}
				item[ks.Partition.Name] = demoKey(ks.Partition.Type, i)
				if ks.Sort.Name != "" {
					item[ks.Sort.Name] = demoKey(ks.Sort.Type, i)
				}
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
			}
			select {
			case batches <- reqs:
			case <-ectx.Done():
				return ectx.Err()
			}
		}
		return nil
	})
	for range parallel {
		eg.Go(func() error {
			for reqs := range batches {
				for attempt := 0; len(reqs) > 0; attempt++ {
					out, err := db.BatchWriteItem(ectx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
					if err != nil {
						return fmt.Errorf("seed %q: %w", table, err)
					}
					written.Add(int64(len(reqs) - len(out.UnprocessedItems[table])))
					reqs = out.UnprocessedItems[table]
					if len(reqs) > 0 {
						time.Sleep(min(time.Duration(attempt+1)*50*time.Millisecond, time.Second)) // back off on unprocessed items
					}
				}
			}
			return nil
		})
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		showProgress(stderr, stop, "seed "+table, &written, int64(items))
	}()
	err := eg.Wait()
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "seeded %s into %q\n", cli.Count(written.Load(), "item"), table)
	return nil
}

// showProgress draws a live bar on a terminal, or logs a line every 2s otherwise, until stop.
func showProgress(w io.Writer, stop <-chan struct{}, label string, n *atomic.Int64, total int64) {
	tty := cli.IsTerminal(w)
	every := 2 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	var m cli.RateMeter
	tick := func(now time.Time) {
		done := n.Load()
		rate := m.Update(now, done)
		if tty {
			cli.ClearLine(w)
			fmt.Fprintf(w, "%s ▕%s▏ %d/%d %6.0f/s ETA %s", label, cli.Bar(done, total, 30), done, total, rate, cli.ETA(done, total, rate))
		} else {
			fmt.Fprintf(w, "%s progress done=%d total=%d rate=%.0f/s\n", label, done, total, rate)
		}
	}
	cli.Ticks(stop, every, tick)
	if tty {
		cli.ClearLine(w)
	}
}
