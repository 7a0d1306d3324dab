package sweep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// Items is the number of items per run.
const Items = 12

// Shards is the number of pending-index shards in index mode.
const Shards = 2

// Fixture holds the tables a sweep reuses: one lease table, one ledger table, and a source table
// per scan mode (index mode needs its index). Each run writes its items afresh (clearing inline
// state) and uses its own group and job (fresh lease slots and ledger rows).
type Fixture struct {
	db          *dynamodb.Client
	prefix      string
	leaseTable  string
	ledgerTable string
	counters    string // the effects outcome's counters (key pk S)

	mu      sync.Mutex
	sources map[scan.Mode]string
	runs    int
}

// NewFixture creates the lease and ledger tables.
func NewFixture(ctx context.Context, db *dynamodb.Client) (*Fixture, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	f := &Fixture{db: db, prefix: "sweep_" + hex.EncodeToString(b[:]), sources: map[scan.Mode]string{}}
	f.leaseTable, f.ledgerTable, f.counters = f.prefix+"_lease", f.prefix+"_ledger", f.prefix+"_counters"
	if err := lock.CreateTable(ctx, db, f.leaseTable); err != nil {
		return nil, err
	}
	if err := worker.CreateLedgerTable(ctx, db, f.ledgerTable); err != nil {
		return nil, errors.Join(err, f.Close(ctx))
	}
	if err := worker.CreateLedgerTable(ctx, db, f.counters); err != nil { // a table keyed by pk (S)
		return nil, errors.Join(err, f.Close(ctx))
	}
	return f, nil
}

// Close deletes every table the fixture made.
func (f *Fixture) Close(ctx context.Context) error {
	names := []string{f.leaseTable, f.ledgerTable, f.counters}
	for _, s := range f.sources {
		names = append(names, s)
	}
	var errs []error
	for _, n := range names {
		_, err := f.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(n)})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// source returns the mode's source table, creating it the first time.
func (f *Fixture) source(ctx context.Context, mode scan.Mode) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sources[mode]; ok {
		return s, nil
	}
	name := f.prefix + "_src_" + string(mode)
	_, err := f.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return "", err
	}
	if err := dynamodb.NewTableExistsWaiter(f.db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		return "", err
	}
	f.sources[mode] = name
	if mode == scan.ModeIndex {
		if err := scan.CreatePendingIndex(ctx, f.db, name, "dp_pending", "dp_shard"); err != nil {
			return "", err
		}
	}
	return name, nil
}

// itemID is item i's key value.
func itemID(i int) string { return fmt.Sprintf("it%04d", i) }

// seed writes the run's items afresh: no ledger state, pending in index mode.
func (f *Fixture) seed(ctx context.Context, table string, mode scan.Mode) error {
	var reqs []types.WriteRequest
	for i := range Items {
		item := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: itemID(i)}}
		if mode == scan.ModeIndex {
			scan.MarkPending(item, "id", "dp_shard", Shards)
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
	}
	for len(reqs) > 0 {
		out, err := f.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
		if err != nil {
			return err
		}
		reqs = out.UnprocessedItems[table]
	}
	return nil
}

// nextRun numbers runs, for unique groups and jobs.
func (f *Fixture) nextRun() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	return f.runs
}
