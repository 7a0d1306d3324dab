// Command lambda is a dynapart worker as an AWS Lambda function (provided.al2023, arm64 or x86).
//
// Each invocation is one worker: it takes a slot of the job's group, works until its deadline
// minus a margin, checkpoints, releases, and returns {"finished": true|false, ...}. Invoke it N
// at a time (N = DYNAPART_WORKERS) from a Step Functions Map/loop or a schedule until finished.
//
// Configuration, from the environment: DYNAPART_TABLE, DYNAPART_WORKERS, DYNAPART_JOB (optional),
// DYNAPART_LEASE_TABLE (optional). The handler here marks each item processed; put your work in
// process().
package main

import (
	"context"
	"log"
	"os"
	"strconv"

	"github.com/aws/aws-lambda-go/lambda"
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
	return worker.Config{
		Client:     db,
		Table:      os.Getenv("DYNAPART_TABLE"),
		Workers:    n,
		Job:        os.Getenv("DYNAPART_JOB"),
		LeaseTable: os.Getenv("DYNAPART_LEASE_TABLE"),
	}, nil
}

func main() {
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := configFromEnv(dynamodb.NewFromConfig(awsCfg))
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(awslambda.Handler(cfg, process))
}
