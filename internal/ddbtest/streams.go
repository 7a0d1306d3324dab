package ddbtest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// Streams returns a DynamoDB Streams client for the test endpoint (inside ForEachBackend, the
// subtest's backend): the same address, region and dummy credentials as Client.
func Streams(t testing.TB, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	t.Helper()
	return dynamodbstreams.NewFromConfig(Config(t), optFns...)
}
