// Package bench is dynapart's performance harness: each scenario measures one claim of the
// README against DynamoDB Local and returns numbers, and Report turns them into BENCHMARKS.md.
//
// Absolute numbers on a shared two-core machine are noisy, so every headline figure is a ratio
// against a baseline measured in the same run and the same repetition (the plain SDK loop, the
// segment mode, ...), with the median and the spread (min–max) over the repetitions.
// Repetitions are interleaved (rep 1 of every variant, then rep 2, ...) so that a burst of load
// from a neighbour hits all variants alike instead of one of them.
//
//	go run ./internal/bench/run -endpoint http://127.0.0.1:8765 -quick -out /tmp/B.md
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/follow"
)

// Env is what every scenario needs.
type Env struct {
	// DB talks to the DynamoDB under test.
	DB *dynamodb.Client
	// Endpoint is its URL (handed to the CLI processes and to `go test`).
	Endpoint string
	// Bin is the dynapart binary for the process scenarios (takeover, memory).
	Bin string
	// ModRoot is the module's root directory, where `go test` runs.
	ModRoot string
	// Progress receives one line per step (stderr in the runner).
	Progress io.Writer
	// ServerPID is DynamoDB Local's process, whose CPU time the cpu scenario reads; 0 finds the
	// process listening on Endpoint's port.
	ServerPID int
	// Streams reads the tables' streams (the follow scenario); nil: a client for Endpoint.
	Streams follow.StreamsClient
}

func (e *Env) logf(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, "bench: "+format+"\n", args...)
	}
}

// NewClient returns a DynamoDB client for endpoint with dummy credentials and a connection pool
// large enough for the highest concurrency measured (64 requests in flight).
func NewClient(endpoint string, hc *http.Client) *dynamodb.Client {
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}
	}
	return dynamodb.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("dynapart", "dynapart", ""),
		BaseEndpoint: aws.String(endpoint),
		HTTPClient:   hc,
	})
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// tableName is a fresh table name with the given prefix.
func tableName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "bench-" + prefix + "-" + hex.EncodeToString(b[:])
}

// createTable creates an on-demand table keyed by id (S) and waits until it is active.
func (e *Env) createTable(ctx context.Context, prefix string) (string, error) {
	name := tableName(prefix)
	_, err := e.DB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return "", fmt.Errorf("create table %s: %w", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(e.DB).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		return "", fmt.Errorf("wait for table %s: %w", name, err)
	}
	return name, nil
}

func (e *Env) dropTable(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _ = e.DB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
}

func itemKey(i int) string { return fmt.Sprintf("item-%08d", i) }

func keyOf(i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: itemKey(i)}}
}

var payload = strings.Repeat("x", 100)

// seedItem is item i as the benchmarks seed it, like `dynapart seed`: id, n and a 100-byte payload.
func seedItem(i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"id":      &types.AttributeValueMemberS{Value: itemKey(i)},
		"n":       &types.AttributeValueMemberN{Value: strconv.Itoa(i)},
		"payload": &types.AttributeValueMemberS{Value: payload},
	}
}

// seed writes items 0..n-1 (seedItem) with BatchWriteItem, 8 requests in flight.
func (e *Env) seed(ctx context.Context, table string, n int) error {
	return e.seedWith(ctx, table, n, seedItem)
}

// seedWith writes item(0)..item(n-1) with BatchWriteItem, 8 requests in flight.
func (e *Env) seedWith(ctx context.Context, table string, n int, item func(int) map[string]types.AttributeValue) error {
	batches := make(chan []types.WriteRequest)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for reqs := range batches {
				for len(reqs) > 0 {
					out, err := e.DB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
					if err != nil {
						errs <- err
						for range batches { // drain
						}
						return
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		}()
	}
	for lo := 0; lo < n; lo += 25 {
		var reqs []types.WriteRequest
		for i := lo; i < min(lo+25, n); i++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item(i)}})
		}
		batches <- reqs
	}
	close(batches)
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("seed %s: %w", table, err)
	default:
		return nil
	}
}

// freshTable creates a table of n seeded items (seedItem); drop it with e.dropTable.
func (e *Env) freshTable(ctx context.Context, prefix string, n int) (string, error) {
	return e.freshTableOf(ctx, prefix, n, seedItem)
}

// freshTableOf creates a table of the n items item(0)..item(n-1); drop it with e.dropTable.
func (e *Env) freshTableOf(ctx context.Context, prefix string, n int, item func(int) map[string]types.AttributeValue) (string, error) {
	t, err := e.createTable(ctx, prefix)
	if err != nil {
		return "", err
	}
	if err := e.seedWith(ctx, t, n, item); err != nil {
		e.dropTable(t)
		return "", err
	}
	return t, nil
}
