package worker

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Hot-path benchmarks: pure computations the worker does once or more per item, so that a
// regression shows in `go test -run '^$' -bench . ./worker/` without DynamoDB.

// noDB satisfies LedgerClient for ledgers whose expressions are built but never sent.
type noDB struct{ LedgerClient }

var (
	hotKey  = Key{"id": &types.AttributeValueMemberS{Value: "3f2504e0-4f89-41d3-9a0c-0305e82c3301"}}
	hotKey2 = Key{
		"tenant": &types.AttributeValueMemberS{Value: "acme-corp"},
		"seq":    &types.AttributeValueMemberN{Value: "123456789012"},
	}
	hotSink  string
	hotNames map[string]string
	hotVals  map[string]types.AttributeValue
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

func hotLedger(b *testing.B) *InlineLedger {
	l, err := NewInlineLedger(noDB{}, "users", []string{"id"}, InlineOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func hotRequest() ClaimRequest {
	now := time.UnixMilli(1_780_000_000_000)
	return ClaimRequest{Key: hotKey, Owner: "host-1234-abcd", Slot: 3, Token: 42, Now: now, Until: now.Add(time.Minute)}
}

// BenchmarkClaimExpression builds the names and values of one claim's UpdateItem (per item
// without batched claims, per transaction item with them).
func BenchmarkClaimExpression(b *testing.B) {
	l := hotLedger(b).core
	r := hotRequest()
	b.ReportAllocs()
	for b.Loop() {
		hotNames, hotVals = l.exprInput(l.claimRequestVals(r), l.x.claimCond, l.x.claimUpdate)
	}
}

// BenchmarkCompleteExpression builds the names and values of one fenced completion.
func BenchmarkCompleteExpression(b *testing.B) {
	l := hotLedger(b).core
	c := Claim{Key: hotKey, Owner: "host-1234-abcd", Slot: 3, Token: 42, Attempt: 1}
	now := time.UnixMilli(1_780_000_000_000)
	b.ReportAllocs()
	for b.Loop() {
		vals := fenceVals(c)
		vals[":done"] = ledgerS(string(StatusDone))
		vals[":now"] = ledgerMillis(now)
		hotNames, hotVals = l.exprInput(vals, l.x.fenceCond, l.x.completeUpdate)
	}
}

// BenchmarkCompleteOnlyExpression builds the names and values of one complete-only write.
func BenchmarkCompleteOnlyExpression(b *testing.B) {
	l := hotLedger(b).core
	r := hotRequest()
	b.ReportAllocs()
	for b.Loop() {
		hotNames, hotVals = l.exprInput(l.claimRequestVals(r), l.x.completeOnlyCond, l.x.completeOnlyUpdate)
	}
}

// BenchmarkLedgerRowKey is the table ledger's canonical key encoding (one per item and write).
func BenchmarkLedgerRowKey(b *testing.B) {
	for _, c := range []struct {
		name  string
		key   Key
		attrs []string
	}{{"hash-key", hotKey, []string{"id"}}, {"hash-and-range", hotKey2, []string{"tenant", "seq"}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := encodeKeyParts(c.key, c.attrs)
				if err != nil {
					b.Fatal(err)
				}
				hotSink = s
			}
		})
	}
}
