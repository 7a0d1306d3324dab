// Command lambda is a dynapart worker as an AWS Lambda function (provided.al2023, arm64 or x86).
//
// Each invocation is one worker: it takes a slot of the job's group, works until its deadline
// minus a margin, checkpoints, releases, and returns {"finished": true|false, ...}. Invoke it N
// at a time (N = DYNAPART_WORKERS) from a Step Functions Map/loop or a schedule until finished.
//
// With DYNAPART_MODE=stream the same binary is the table's stream tail instead: a DynamoDB
// Streams event source mapping invokes it with batches of records, and each changed item's version
// is handled once, after the back-fill and beside it (awslambda.StreamHandler; records it could not
// resolve are reported as batch item failures). Both record content versions (Versions), so the
// stream does not handle again what the back-fill handled.
//
// Configuration, from the environment: DYNAPART_TABLE, DYNAPART_WORKERS, DYNAPART_JOB (optional),
// DYNAPART_LEASE_TABLE (optional), DYNAPART_MODE (backfill, the default, or stream). The handler
// here marks each item processed; put your work in process().
package main

import (
	"context"
	"log"
	"net/http"
	"os"
	"strconv"

	"github.com/aws/aws-lambda-go/lambda"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/worker"
	"github.com/dynapart/dynapart/worker/awslambda"
)

// process is the per-item work. Use item.IdempotencyKey for side effects that must not repeat.
func process(ctx context.Context, item worker.Item) error {
	_ = item
	return nil
}

// configFromEnv builds the worker configuration from DYNAPART_* variables.
func configFromEnv(db worker.DynamoDBClient) (worker.Config, error) {
	n, err := strconv.Atoi(os.Getenv("DYNAPART_WORKERS"))
	if err != nil {
		return worker.Config{}, &worker.ConfigError{Field: "DYNAPART_WORKERS", Reason: "must be a number"}
	}
	cfg := worker.Config{
		Client:     db,
		Table:      os.Getenv("DYNAPART_TABLE"),
		Workers:    n,
		Job:        os.Getenv("DYNAPART_JOB"),
		LeaseTable: os.Getenv("DYNAPART_LEASE_TABLE"),
		Versions:   true, // the stream tail (DYNAPART_MODE=stream) skips what the back-fill handled
	}
	if streamMode() {
		cfg.Group = cfg.Table + "/" + cfg.Job + "/stream" // a continuous group of its own
	}
	return cfg, nil
}

// streamMode reports DYNAPART_MODE=stream: the function is the table's stream tail.
func streamMode() bool { return os.Getenv("DYNAPART_MODE") == "stream" }

func main() {
	// The SDK's HTTP client keeps 10 idle connections per host, fewer than the worker's default 16
	// handlers in flight (README's library section).
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
	})
	awsCfg, err := config.LoadDefaultConfig(context.Background(), config.WithHTTPClient(hc))
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := configFromEnv(dynamodb.NewFromConfig(awsCfg))
	if err != nil {
		log.Fatal(err)
	}
	if streamMode() {
		lambda.Start(awslambda.StreamHandler(cfg, process))
		return
	}
	lambda.Start(awslambda.Handler(cfg, process))
}
