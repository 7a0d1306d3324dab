// Package ddbtest is the test harness for code that talks to DynamoDB: it gives each test a client
// for one shared DynamoDB Local and fresh, uniquely named tables.
//
// The endpoint comes from $DYNAPART_TEST_ENDPOINT (make test sets it). When it is unset the harness
// starts DynamoDB Local itself, once per test binary in Main before any test (so that its goroutines
// are not taken for a test's leak), and `go test -timeout 45m ./...` works too (the worker
// package's tests take over go test's default 10 minutes). When
// DynamoDB cannot be reached a test fails with CI=true and skips otherwise: a test that skips in CI
// would count as missing.
//
//	func TestMain(m *testing.M) { ddbtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		db := ddbtest.Client(t)
//		table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
//		...
//	}
package ddbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/goleak"

	"github.com/dynapart/dynapart/localstack"
)

// EndpointEnv names the environment variable that points the tests at a running DynamoDB.
const EndpointEnv = "DYNAPART_TEST_ENDPOINT"

var (
	startOnce sync.Once
	endpoint  string
	startErr  error
	server    *localstack.Server

	transport = &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second}
	// HTTPClient is shared by every client the harness makes, so Main can close its idle
	// connections before looking for leaked goroutines.
	HTTPClient = &http.Client{Transport: transport}
)

// InCI reports whether CI=true: then a test that cannot reach DynamoDB fails instead of skipping.
func InCI() bool { return strings.EqualFold(os.Getenv("CI"), "true") || os.Getenv("CI") == "1" }

// Main runs the package's tests, stops a DynamoDB Local the harness started, and fails the run when
// goroutines leak (goleak). Extra goleak options may be passed.
func Main(m *testing.M, opts ...goleak.Option) {
	// DynamoDB Local is started before any test so that its process's goroutines are there before
	// every leak snapshot: started lazily inside a test, they would count as that test's leak.
	if startsEagerly() {
		startOnce.Do(start)
	}
	// The goroutines running before any test (the runtime's, init's, the harness's) are not leaks;
	// the snapshot must be taken now: taken after m.Run it would excuse every goroutine a test left
	// behind.
	opts = append(opts, goleak.IgnoreCurrent())
	code := m.Run()
	transport.CloseIdleConnections()
	if server != nil {
		_ = server.Stop()
	}
	stopMoto()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startsEagerly reports whether Main starts DynamoDB Local before the tests: not for a test
// binary that only lists its tests or fuzzes (fuzz workers run TestMain too).
func startsEagerly() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	for _, name := range []string{"test.list", "test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return false
		}
	}
	return true
}

// start finds the endpoint: $DYNAPART_TEST_ENDPOINT, or a DynamoDB Local it starts.
func start() {
	if e := os.Getenv(EndpointEnv); e != "" {
		endpoint = e
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	server, startErr = localstack.Start(ctx, localstack.Options{})
	if startErr == nil {
		endpoint = server.Endpoint()
	}
}

// Endpoint returns the DynamoDB endpoint for tests, starting DynamoDB Local on first use when
// $DYNAPART_TEST_ENDPOINT is unset. It fails (CI) or skips the test when there is none.
func Endpoint(t testing.TB) string {
	t.Helper()
	if b, ok := boundBackend(t); ok {
		return backendEndpoint(t, b)
	}
	startOnce.Do(start)
	if endpoint == "" {
		msg := fmt.Sprintf("DynamoDB is not reachable (set %s or install Java 17 and npm): %v", EndpointEnv, startErr)
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return endpoint
}

// Config returns an AWS config for the test endpoint with static dummy credentials.
func Config(t testing.TB) aws.Config {
	t.Helper()
	ep := Endpoint(t)
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("dynapart", "dynapart", ""),
		BaseEndpoint: aws.String(ep),
		HTTPClient:   HTTPClient,
	}
}

// Client returns a DynamoDB client for the test endpoint. It checks that DynamoDB answers.
func Client(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	c := dynamodb.NewFromConfig(Config(t), optFns...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)}); err != nil {
		msg := fmt.Sprintf("DynamoDB at %s does not answer: %v", Endpoint(t), err)
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return c
}

var nonName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// TableName returns a unique table name derived from the test's name.
func TableName(t testing.TB, prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := nonName.ReplaceAllString(t.Name(), "_")
	if len(name) > 150 {
		name = name[:150]
	}
	if prefix != "" {
		prefix += "_"
	}
	return prefix + name + "_" + hex.EncodeToString(b[:])
}

// Key is one key attribute: its name and type ("S", "N" or "B").
type Key struct {
	Name string
	Type string
}

// CreateTable creates a fresh on-demand table with a partition key and an optional sort key, waits
// until it is active, and deletes it when the test ends.
func CreateTable(t testing.TB, db *dynamodb.Client, pk Key, sk ...Key) string {
	t.Helper()
	name := TableName(t, "")
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(pk.Name), AttributeType: types.ScalarAttributeType(pk.Type)},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(pk.Name), KeyType: types.KeyTypeHash}},
	}
	if len(sk) > 0 {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(sk[0].Name), AttributeType: types.ScalarAttributeType(sk[0].Type)})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(sk[0].Name), KeyType: types.KeyTypeRange})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.CreateTable(ctx, in); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("wait for table %s: %v", name, err)
	}
	DeleteOnCleanup(t, db, name)
	return name
}

// DeleteOnCleanup deletes the table when the test ends (tables made by other helpers, too).
func DeleteOnCleanup(t testing.TB, db *dynamodb.Client, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
}
