// Command files replays the file-batch incident: a cron job on several workers, every few
// minutes, runs "select where processed = false limit 100", processes the rows and sets
// processed = true. Two runs that overlap process the same files twice, and every run reads the
// whole table to find the few rows left to do.
//
// It runs two overlapping naive polls, then dynapart workers in continuous mode on a sparse
// pending index: files are processed once (also those added while the workers run), and a poll
// reads the pending rows only, not the table.
//
//	dynapart local &
//	go run ./examples/files --endpoint http://127.0.0.1:8000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

func main() {
	var s Sizes
	flag.IntVar(&s.Done, "done", 10000, "rows already processed")
	flag.IntVar(&s.Pending, "pending", 100, "rows to process at the start (half of them old rows without a hash)")
	flag.IntVar(&s.Added, "added", 100, "rows added while the workers run")
	flag.IntVar(&s.Workers, "workers", 2, "workers")

	ctx := context.Background()
	db, suffix, keep := exampleutil.Setup(ctx)
	naiveTable, table, leases := "files-naive-"+suffix, "files-"+suffix, "files-leases-"+suffix
	err := run(ctx, db, naiveTable, table, leases, s)
	if !keep {
		exampleutil.DeleteTables(db, naiveTable, table, leases)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, db *dynamodb.Client, naiveTable, table, leases string, s Sizes) error {
	for _, t := range []string{naiveTable, table} {
		if err := exampleutil.CreateTable(ctx, db, t, exampleutil.Key{Name: attrFile, Type: types.ScalarAttributeTypeS}); err != nil {
			return err
		}
	}
	if err := scan.CreatePendingIndex(ctx, db, table, IndexName, ShardAttr); err != nil {
		return err
	}
	if err := lock.CreateTable(ctx, db, leases); err != nil {
		return err
	}

	fmt.Printf("%d processed rows, %d to process (half without a hash), %d more added while the workers run\n\n", s.Done, s.Pending, s.Added)
	if err := Seed(ctx, db, naiveTable, s, false); err != nil {
		return err
	}
	naive, err := NaiveOverlap(ctx, db, naiveTable)
	if err != nil {
		return err
	}
	fmt.Printf("naive:    two cron runs at once: %d files processed, %d twice; each select read %d items (%.1f RCU)\n",
		naive.Files, naive.Duplicates, naive.ReadPerPoll, naive.RCUPerPoll)

	if err := Seed(ctx, db, table, s, true); err != nil {
		return err
	}
	res, err := RunDynapart(ctx, db, table, leases, s)
	if err != nil {
		return err
	}
	fmt.Printf("dynapart: %d files processed, %d twice, %d rows left pending\n", res.Files, res.Duplicates, res.LeftPending)
	fmt.Printf("          processing the first %d read %d items in %d index queries (%.1f RCU)\n",
		s.Pending, res.First.Items, res.First.Queries, res.First.RCU)
	fmt.Printf("          once all were done, an idle poll of all %d shards read %d items (%.1f RCU)\n",
		Shards, res.IdlePoll.Items, res.IdlePoll.RCU)
	var slots []int
	for slot := range res.BySlot {
		slots = append(slots, slot)
	}
	sort.Ints(slots)
	for _, slot := range slots {
		fmt.Printf("          slot %d processed %d files\n", slot, res.BySlot[slot])
	}
	return nil
}

// Sizes sizes the scenario.
type Sizes struct {
	Done, Pending, Added, Workers int
}

// Seed writes s.Done processed rows and s.Pending unprocessed ones, half of them old rows without
// a hash; pending marks the unprocessed rows for the pending index.
func Seed(ctx context.Context, db *dynamodb.Client, table string, s Sizes, pending bool) error {
	rows := make([]map[string]types.AttributeValue, 0, s.Done+s.Pending)
	for i := range s.Done {
		rows = append(rows, FileRow(i, true, i%2 == 0))
	}
	for i := s.Done; i < s.Done+s.Pending; i++ {
		old := i%2 == 0
		if pending {
			rows = append(rows, PendingRow(i, old))
		} else {
			rows = append(rows, FileRow(i, false, old))
		}
	}
	return exampleutil.WriteItems(ctx, db, table, rows)
}

// NaiveResult is what two overlapping naive cron runs did.
type NaiveResult struct {
	Files, Duplicates, ReadPerPoll int
	RCUPerPoll                     float64
}

// NaiveOverlap runs the naive job on two workers whose runs start at the same moment (both
// selects finish before either marks a row processed, as when two cron schedules fire in the same
// minute).
func NaiveOverlap(ctx context.Context, db *dynamodb.Client, table string) (NaiveResult, error) {
	p := &Processor{}
	both := exampleutil.NewBarrier(2)
	var wg sync.WaitGroup
	reads := make([]int, 2)
	rcus := make([]float64, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			reads[i], rcus[i], errs[i] = PollNaive(ctx, db, table, p, func() { both.Wait(ctx) })
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return NaiveResult{}, err
	}
	files, dups, _ := p.Counts()
	return NaiveResult{Files: files, Duplicates: dups, ReadPerPoll: reads[0], RCUPerPoll: rcus[0]}, nil
}

// DynapartResult is what the dynapart workers did.
type DynapartResult struct {
	Files, Duplicates, LeftPending int
	BySlot                         map[int]int
	First                          MeterReading // reads until the first s.Pending files were processed
	IdlePoll                       MeterReading // reads of one poll of every shard once nothing is pending
}

// RunDynapart runs s.Workers continuous workers in index mode: it waits until the pending rows
// are processed, adds s.Added rows while the workers run, waits until those are processed too,
// measures an idle poll, and stops the workers.
func RunDynapart(ctx context.Context, db *dynamodb.Client, table, leases string, s Sizes) (DynapartResult, error) {
	var res DynapartResult
	meter := &Meter{DynamoDBClient: db}
	p := &Processor{}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, s.Workers)
	for range s.Workers {
		w, err := worker.New(worker.Config{
			Client: meter, Table: table, LeaseTable: leases, Workers: s.Workers,
			Mode: scan.ModeIndex, IndexName: IndexName, ShardAttr: ShardAttr, Shards: Shards,
			PollInterval: 200 * time.Millisecond, StandbyPoll: 100 * time.Millisecond, Concurrency: 8,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			return res, err
		}
		wg.Go(func() {
			if err := w.Run(runCtx, Handler(db, table, p)); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
				stop()
			}
		})
	}
	wait := func(ch <-chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-runCtx.Done():
			return fmt.Errorf("workers stopped early: %w", runCtx.Err())
		}
	}
	err := func() error {
		if err := wait(p.Reached(s.Pending)); err != nil {
			return err
		}
		res.First = meter.Read()
		var added []map[string]types.AttributeValue
		for i := s.Done + s.Pending; i < s.Done+s.Pending+s.Added; i++ {
			added = append(added, PendingRow(i, i%2 == 0))
		}
		if err := exampleutil.WriteItems(runCtx, db, table, added); err != nil {
			return err
		}
		if err := wait(p.Reached(s.Pending + s.Added)); err != nil {
			return err
		}
		// Completed items leave the index as they finish; one poll later nothing is left to read.
		// Skip one full round of shard queries (it may still see the last rows), measure the next.
		if err := wait(meter.AfterQueries(Shards)); err != nil {
			return err
		}
		before := meter.Read()
		if err := wait(meter.AfterQueries(Shards)); err != nil {
			return err
		}
		res.IdlePoll = meter.Read().Sub(before)
		return nil
	}()
	stop()
	wg.Wait()
	close(errs)
	for werr := range errs {
		err = errors.Join(err, werr)
	}
	if err != nil {
		return res, err
	}
	res.Files, res.Duplicates, res.BySlot = p.Counts()
	res.LeftPending, err = countPending(ctx, db, table)
	return res, err
}

// countPending counts the rows still in the pending index or not processed.
func countPending(ctx context.Context, db *dynamodb.Client, table string) (int, error) {
	pages := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                aws.String(table),
		FilterExpression:         aws.String("attribute_exists(#s) OR #p = :false"),
		ExpressionAttributeNames: map[string]string{"#s": ShardAttr, "#p": attrProcessed},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":false": &types.AttributeValueMemberBOOL{Value: false},
		},
		Select:         types.SelectCount,
		ConsistentRead: aws.Bool(true),
	})
	n := 0
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("count pending: %w", err)
		}
		n += int(out.Count)
	}
	return n, nil
}
