// Command receipts replays the delivery-receipts load test: receipts (IN_GATEWAY < SENT < DELIVERED
// < OPENED < CLICKED) arrive out of order and in parallel for the same message, and each message's
// status must only move forward while each campaign keeps a funnel of counts.
//
// It consumes the same receipts three ways on fresh tables: the naive read-then-write, the
// optimistic conditional update (no lock), and the pessimistic baseline (a lock.Mutex per message
// around read-modify-write), and prints correctness, events/s and mean batch latency.
//
//	dynapart local &
//	go run ./examples/receipts --endpoint http://127.0.0.1:8000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
)

func main() {
	endpoint := flag.String("endpoint", os.Getenv("DYNAPART_ENDPOINT"), "DynamoDB endpoint, e.g. http://127.0.0.1:8000 (default $DYNAPART_ENDPOINT; empty: the AWS SDK chain)")
	load := Load{Campaigns: 5, Seed: 1}
	flag.IntVar(&load.Batches, "batches", 20, "batches of receipts (the published test: 1000)")
	flag.IntVar(&load.BatchSize, "batch-size", 1000, "receipts per batch")
	flag.IntVar(&load.Consumers, "consumers", 10, "consumers taking batches in parallel")
	flag.IntVar(&load.InFlight, "in-flight", 4, "receipts each consumer applies at a time")
	keep := flag.Bool("keep", false, "keep the tables this run creates")
	flag.Parse()

	ctx := context.Background()
	db, err := newClient(ctx, *endpoint)
	if err != nil {
		log.Fatal(err)
	}
	suffix := time.Now().Format("20060102-150405")
	leases := "receipts-leases-" + suffix
	if err := lock.CreateTable(ctx, db, leases); err != nil {
		log.Fatal(err)
	}
	tables := []string{leases}
	defer func() {
		if !*keep {
			deleteTables(db, tables...)
		}
	}()
	batches := load.Generate()
	fmt.Printf("%d batches of %d receipts, %d consumers x %d in flight\n\n", load.Batches, load.BatchSize, load.Consumers, load.InFlight)
	var results = map[Mode]Outcome{}
	for _, mode := range []Mode{Naive, Optimistic, Pessimistic} {
		table := fmt.Sprintf("receipts-%s-%s", mode, suffix)
		if err := CreateStateTable(ctx, db, table); err != nil {
			log.Print(err)
			return
		}
		tables = append(tables, table)
		out, err := Run(ctx, db, table, leases, mode, load, batches)
		if err != nil {
			log.Print(err)
			return
		}
		results[mode] = out
		fmt.Printf("%-11s %7.0f events/s  mean batch %7.0f ms  messages below their highest receipt: %d  funnel counters wrong: %d\n",
			mode, out.EventsPerSec, ms(out.MeanBatch), out.WrongStatus, out.WrongCounters)
	}
	o, p := results[Optimistic], results[Pessimistic]
	fmt.Printf("\noptimistic / pessimistic: %.1fx the throughput, final statuses identical: %v\n",
		o.EventsPerSec/p.EventsPerSec, SameStatuses(o.State, p.State))
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
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrID), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrID), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func newClient(ctx context.Context, endpoint string) (*dynamodb.Client, error) {
	if endpoint == "" {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, err
		}
		return dynamodb.NewFromConfig(cfg), nil
	}
	// DynamoDB Local accepts any credentials.
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("dynapart", "dynapart", ""),
		BaseEndpoint: aws.String(endpoint),
	}), nil
}

func deleteTables(db *dynamodb.Client, names ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range names {
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(n)})
	}
}
