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

// TestIdempotencyKeyStable: the key a handler gets for an item stays the same across releases
// (handlers record it beside their effects): these values were made by the first implementation.
func TestIdempotencyKeyStable(t *testing.T) {
	for _, c := range []struct {
		job, table string
		key        Key
		want       string
	}{
		{"job-1", "users", hotKey, "31d44468c5858a94fa29187b55ad44be"},
		{"job-1", "users", hotKey2, "62546183a1cf11bb60cbf0d4fde69b8c"},
		{"job-1", "users", Key{"b": &types.AttributeValueMemberB{Value: []byte{0, 1, 2}}}, "388f35f65866d2cd3d8dac76397f71d2"},
		{"job-1", "users", Key{"z": &types.AttributeValueMemberN{Value: "7"}, "a": &types.AttributeValueMemberS{Value: ""}}, "e72ab76c407eafee502a12e140e25054"},
		{"", "", Key{}, "af5570f5a1810b7af78caf4bc70a660f"},
	} {
		if got := idempotencyKey(c.job, c.table, c.key); got != c.want {
			t.Errorf("idempotencyKey(%q, %q, %v) = %s, want %s", c.job, c.table, c.key, got, c.want)
		}
	}
}
