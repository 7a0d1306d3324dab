package scan

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Hot-path benchmarks: pure computations the scanner does per item or per page, so that a
// regression shows in `go test -run '^$' -bench . ./scan/` without DynamoDB.

var (
	hotInt    int
	hotString string
	hotPtr    *string
	hotNames  map[string]string
)

func hotItem() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"id":         &types.AttributeValueMemberS{Value: "3f2504e0-4f89-41d3-9a0c-0305e82c3301"},
		"message_id": &types.AttributeValueMemberN{Value: "918273645501"},
		"payload":    &types.AttributeValueMemberS{Value: string(make([]byte, 100))},
		"grp":        &types.AttributeValueMemberS{Value: "g7"},
		"n":          &types.AttributeValueMemberN{Value: "42"},
	}
}

// BenchmarkPartitionOf is filter mode's per-item decision: look the attribute up and map it to a
// slot (a string key by CRC-32, a number key by value mod N).
func BenchmarkPartitionOf(b *testing.B) {
	item := hotItem()
	for _, attr := range []string{"id", "message_id"} {
		b.Run(attr, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hotInt += PartitionOf(item, attr, 16)
			}
		})
	}
}

// BenchmarkItemSize is the read limiter's per-item size estimate.
func BenchmarkItemSize(b *testing.B) {
	item := hotItem()
	b.ReportAllocs()
	for b.Loop() {
		hotInt += itemSize(item)
	}
}

// BenchmarkProjection builds a scan's ProjectionExpression with placeholders (once per Run).
func BenchmarkProjection(b *testing.B) {
	s := &Scanner{cfg: Config{Projection: []string{"payload", "grp", "status", "a.b", "size"}, PartitionAttr: "message_id"},
		plan: Plan{Mode: ModeFilter, Slots: 16}}
	keys := []string{"id"}
	b.ReportAllocs()
	for b.Loop() {
		hotPtr, hotNames = s.buildProjection(keys)
	}
}

// BenchmarkCheckpointSlot encodes and decodes the position a slot saves on its lease about once a
// second: 4 sub-segments of 64, each with a LastEvaluatedKey.
func BenchmarkCheckpointSlot(b *testing.B) {
	p := Position{Table: "users", Mode: ModeSegment, TotalSegments: 64}
	for i := range 4 {
		p.Cursors = append(p.Cursors, Cursor{TotalSegments: 64, Segment: 12 + i, LastEvaluatedKey: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: "user-" + strconv.Itoa(1_000_000+i)}}})
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := EncodeCheckpoint(p)
			if err != nil {
				b.Fatal(err)
			}
			hotString = s
		}
	})
	enc, err := EncodeCheckpoint(p)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeCheckpoint(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
