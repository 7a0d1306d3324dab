package worker

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Hot-path benchmarks: pure computations the worker does once or more per item, so that a
// regression shows in `go test -run '^$' -bench . ./worker/` without DynamoDB.

var (
	hotKey  = Key{"id": &types.AttributeValueMemberS{Value: "3f2504e0-4f89-41d3-9a0c-0305e82c3301"}}
	hotKey2 = Key{
		"tenant": &types.AttributeValueMemberS{Value: "acme-corp"},
		"seq":    &types.AttributeValueMemberN{Value: "123456789012"},
	}
	hotSink string
)

// BenchmarkIdempotencyKey is the key every Item carries: SHA-256 over the job and the key.
func BenchmarkIdempotencyKey(b *testing.B) {
	for _, c := range []struct {
		name string
		key  Key
	}{{"hash-key", hotKey}, {"hash-and-range", hotKey2}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hotSink = idempotencyKey("campaign-2026-05", "users", c.key)
			}
		})
	}
}
