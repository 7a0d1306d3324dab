// Command receipts replays the delivery-receipts load test: receipts (IN_GATEWAY < SENT < DELIVERED
// < OPENED < CLICKED) arrive out of order and in parallel for the same message, and each message's
// status must only move forward while each campaign keeps a funnel of counts.
//
// It consumes the same receipts three ways on fresh tables: the naive read-then-write, the
// optimistic conditional update (no lock), and the pessimistic baseline (a lock.Mutex per message
// around read-modify-write), and prints correctness, events/s and mean batch latency.
//
// Then it parks receipts in an inbox table and consumes them with dynapart workers, child
// processes of this program, SIGKILLing two of them in the middle of a receipt: with the plain
// optimistic handler and the pessimistic one the funnel drifts; with the handler's writes returned
// as effects (committed with the receipt's completion) every status and counter is exact.
//
//	dynapart local &
//	go run ./examples/receipts --endpoint http://127.0.0.1:8000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/lock"
)

func main() {
	exampleutil.RunIfChild(RunChild) // a worker started by this program: run it and exit
	load := Load{Campaigns: 5, Seed: 1}
	crashBatches := flag.Int("crash-batches", 4, "crash runs: batches of 60 receipts")
	flag.IntVar(&load.Batches, "batches", 20, "batches of receipts (the published test: 1000)")
	flag.IntVar(&load.BatchSize, "batch-size", 1000, "receipts per batch")
	flag.IntVar(&load.Consumers, "consumers", 10, "consumers taking batches in parallel")
	flag.IntVar(&load.InFlight, "in-flight", 4, "receipts each consumer applies at a time")

	code := 0 // the exit status, once the tables are deleted (the defer below runs before this one)
	defer func() {
		if code != 0 {
			os.Exit(code)
		}
	}()
	ctx := context.Background()
	db, suffix, keep := exampleutil.Setup(ctx, exampleutil.AtLeast{Flag: "crash-batches", Value: crashBatches, Min: 1},
		exampleutil.AtLeast{Flag: "batches", Value: &load.Batches, Min: 1}, exampleutil.AtLeast{Flag: "batch-size", Value: &load.BatchSize, Min: 1},
		exampleutil.AtLeast{Flag: "consumers", Value: &load.Consumers, Min: 1}, exampleutil.AtLeast{Flag: "in-flight", Value: &load.InFlight, Min: 1})
	leases := "receipts-leases-" + suffix
	if err := lock.CreateTable(ctx, db, leases); err != nil {
		log.Fatal(err)
	}
	tables := []string{leases}
	defer func() {
		if !keep {
			exampleutil.DeleteTables(db, tables...)
		}
	}()
	batches := load.Generate()
	fmt.Printf("%d batches of %d receipts, %d consumers x %d in flight\n\n", load.Batches, load.BatchSize, load.Consumers, load.InFlight)
	var results = map[Mode]Outcome{}
	for _, mode := range []Mode{Naive, Optimistic, Pessimistic} {
		table := fmt.Sprintf("receipts-%s-%s", mode, suffix)
		if err := CreateStateTable(ctx, db, table); err != nil {
			log.Print(err)
			code = 1
			return
		}
		tables = append(tables, table)
		out, err := Run(ctx, db, table, leases, mode, load, batches)
		if err != nil {
			log.Print(err)
			code = 1
			return
		}
		results[mode] = out
		fmt.Printf("%-11s %7.0f events/s  mean batch %7.0f ms  messages below their highest receipt: %d  funnel counters wrong: %d\n",
			mode, out.EventsPerSec, exampleutil.Ms(out.MeanBatch), out.WrongStatus, out.WrongCounters)
	}
	o, p := results[Optimistic], results[Pessimistic]
	fmt.Printf("\noptimistic / pessimistic: %.1fx the throughput, final statuses identical: %v\n",
		o.EventsPerSec/p.EventsPerSec, SameStatuses(o.State, p.State))

	crashLoad := Load{Batches: *crashBatches, BatchSize: 60, Consumers: 2, InFlight: 1, Campaigns: 5, Seed: 1}
	crashed, err := crashRuns(ctx, db, suffix, crashLoad.Generate())
	tables = append(tables, crashed...)
	if err != nil {
		log.Print(err)
		code = 1
	}
}

// crashRuns runs the crash run in every worker mode and prints what each left. It returns the
// tables it created.
func crashRuns(ctx context.Context, db *dynamodb.Client, suffix string, batches [][]Event) ([]string, error) {
	fmt.Printf("\nthe receipts parked in an inbox, dynapart workers (2 slots) as child processes, 2 of them SIGKILLed mid-receipt:\n")
	var created []string
	for _, mode := range []Mode{Optimistic, Pessimistic, Effects} {
		t := Tables{
			Inbox: fmt.Sprintf("receipts-inbox-%s-%s", mode, suffix), State: fmt.Sprintf("receipts-crash-%s-%s", mode, suffix),
			Leases: "receipts-leases-" + suffix,
		}
		for _, name := range []string{t.Inbox, t.State} {
			if err := CreateStateTable(ctx, db, name); err != nil {
				return created, err
			}
			created = append(created, name)
		}
		out, err := CrashRun(ctx, db, exampleutil.Endpoint(), t, mode, batches)
		if err != nil {
			return created, fmt.Errorf("%s: %w", mode, err)
		}
		fmt.Printf("%-11s %d receipts, %d done, %d failed; messages below their highest receipt: %d  funnel counters wrong: %d (%d counts missing, %d extra)\n",
			mode, out.Receipts, out.Ledger.Done, out.Ledger.Failed, out.WrongStatus, out.WrongCounters, out.Missing, out.Extra)
	}
	return created, nil
}

// Mode is a way of applying receipts.
type Mode string

// The three modes.
const (
	Naive       Mode = "naive"
	Optimistic  Mode = "optimistic"
	Pessimistic Mode = "pessimistic"
)

// Outcome is one mode's measurements and the state it left.
type Outcome struct {
	LoadResult
	State                      State
	WrongStatus, WrongCounters int
}

// Run consumes the batches in one mode into table (which must be empty) and checks the result.
func Run(ctx context.Context, db *dynamodb.Client, table, leaseTable string, mode Mode, load Load, batches [][]Event) (Outcome, error) {
	s := &Store{DB: db, Table: table}
	var apply func(context.Context, Event) error
	switch mode {
	case Naive:
		apply = func(ctx context.Context, ev Event) error { return s.ApplyNaive(ctx, ev, NaiveHooks{}) }
	case Optimistic:
		apply = s.ApplyOptimistic
	case Pessimistic:
		// A waiter re-reads a held lock every 5-10 ms: far quicker than the 1 s default, so the
		// baseline is not slowed by idle waiting, only by the lock's round trips and by receipts
		// of one message taking turns. A lock is held for milliseconds; the 30 s TTL only keeps a
		// holder stalled by an overloaded machine from losing its lock mid-update (the receipt
		// would then fail with the lease's cause).
		locks, err := lock.New(db, leaseTable, lock.WithPollInterval(10*time.Millisecond), lock.WithLeaseTTL(30*time.Second))
		if err != nil {
			return Outcome{}, err
		}
		apply = func(ctx context.Context, ev Event) error { return s.ApplyPessimistic(ctx, locks, ev) }
	default:
		return Outcome{}, fmt.Errorf("unknown mode %q", mode)
	}
	res, err := load.Consume(ctx, batches, apply)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", mode, err)
	}
	st, err := s.ReadState(ctx)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{LoadResult: res, State: st}
	out.WrongStatus, out.WrongCounters = Check(st, batches)
	return out, nil
}

// SameStatuses reports whether two runs left every message and every funnel counter the same.
func SameStatuses(a, b State) bool {
	if len(a.Messages) != len(b.Messages) || len(a.Funnels) != len(b.Funnels) {
		return false
	}
	for id, s := range a.Messages {
		if b.Messages[id] != s {
			return false
		}
	}
	for c, f := range a.Funnels {
		for _, s := range Statuses {
			if b.Funnels[c].Reached[s] != f.Reached[s] {
				return false
			}
		}
	}
	return true
}

// CreateStateTable creates the state table (pk id, S) and waits until it is active.
func CreateStateTable(ctx context.Context, db *dynamodb.Client, name string) error {
	return exampleutil.CreateTable(ctx, db, name, exampleutil.Key{Name: attrID, Type: types.ScalarAttributeTypeS})
}
