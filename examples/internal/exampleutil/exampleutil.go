// Package exampleutil is the examples' shared plumbing: the -endpoint and -keep flags and the
// DynamoDB client, creating, filling and deleting the tables a run uses, and a barrier to make an
// interleaving certain. It is internal to the examples and not part of dynapart's API; the story
// of each example (the naive code, the fix) stays in the example itself.
package exampleutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Setup registers the flags every example has, -endpoint (default $DYNAPART_ENDPOINT) and -keep,
// next to those the example registered before, and parses the command line. It returns a client
// for -endpoint, the suffix of this run's table names (e.g. "20060102-150405") and -keep. When
// the client cannot be made it exits through log.Fatal; a flag below its minimum (mins) exits 2
// naming it.
func Setup(ctx context.Context, mins ...AtLeast) (db *dynamodb.Client, suffix string, keep bool) {
	flag.StringVar(&endpoint, "endpoint", os.Getenv("DYNAPART_ENDPOINT"), "DynamoDB endpoint, e.g. http://127.0.0.1:8000 (default $DYNAPART_ENDPOINT; empty: the AWS SDK chain)")
	flag.BoolVar(&keep, "keep", false, "keep the tables this run creates")
	flag.Parse()
	CheckFlags(mins...)

	db, err := NewClient(ctx, endpoint)
	if err != nil {
		log.Fatal(err)
	}
	return db, time.Now().Format("20060102-150405"), keep
}

var endpoint string

// Endpoint is the -endpoint Setup parsed, for the children an example starts.
func Endpoint() string { return endpoint }

// NewClient returns a DynamoDB client for endpoint with static dummy credentials (DynamoDB Local
// accepts any), or, when endpoint is empty, one from the AWS SDK's default configuration chain.
func NewClient(ctx context.Context, endpoint string) (*dynamodb.Client, error) {
	if endpoint == "" {
		cfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(HTTPClient()))
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
		HTTPClient:   HTTPClient(),
	}), nil
}

// HTTPClient is the SDK's HTTP client with an idle pool of 256 connections (the SDK's keeps 10 per
// host, fewer than a worker's default 16 handlers in flight: see README's library section).
func HTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
	})
}

// Key is one key attribute of a table: its name and type.
type Key struct {
	Name string
	Type types.ScalarAttributeType
}

// CreateTable creates an on-demand table with the partition key hash and, if given, the sort key
// sort, and waits until it is active. A table that already exists is not an error.
func CreateTable(ctx context.Context, db *dynamodb.Client, name string, hash Key, sort ...Key) error {
	attrs := []types.AttributeDefinition{{AttributeName: aws.String(hash.Name), AttributeType: hash.Type}}
	schema := []types.KeySchemaElement{{AttributeName: aws.String(hash.Name), KeyType: types.KeyTypeHash}}
	for _, k := range sort {
		attrs = append(attrs, types.AttributeDefinition{AttributeName: aws.String(k.Name), AttributeType: k.Type})
		schema = append(schema, types.KeySchemaElement{AttributeName: aws.String(k.Name), KeyType: types.KeyTypeRange})
	}
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: attrs,
		KeySchema:            schema,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute)
}

// DeleteTables deletes the tables, best effort, within 30 seconds of its own (it runs on the way
// out, when the run's context may be done).
func DeleteTables(db *dynamodb.Client, names ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range names {
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(n)})
	}
}

// BatchWriter is the DynamoDB call WriteItems makes; any *dynamodb.Client fits.
type BatchWriter interface {
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// WriteItems puts items into table with BatchWriteItem, 25 at a time, retrying unprocessed items.
func WriteItems(ctx context.Context, db BatchWriter, table string, items []map[string]types.AttributeValue) error {
	for lo := 0; lo < len(items); lo += 25 {
		var reqs []types.WriteRequest
		for _, item := range items[lo:min(lo+25, len(items))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		for len(reqs) > 0 {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			if err != nil {
				return fmt.Errorf("write %s: %w", table, err)
			}
			reqs = out.UnprocessedItems[table]
		}
	}
	return nil
}

// Barrier releases its waiters once n have arrived (or their ctx ends).
type Barrier struct {
	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

// NewBarrier returns a barrier for n waiters.
func NewBarrier(n int) *Barrier { return &Barrier{waiting: n, open: make(chan struct{})} }

// Wait arrives at the barrier and blocks until all n have arrived or ctx ends.
func (b *Barrier) Wait(ctx context.Context) {
	b.mu.Lock()
	b.waiting--
	if b.waiting == 0 {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-ctx.Done():
	}
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
