package ledger

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Hot-path benchmarks: pure computations the ledger does once or more per item, so that a
// regression shows in `go test -run '^$' -bench . ./ledger/` without DynamoDB.

// noDB satisfies Client for ledgers whose expressions are built but never sent.
type noDB struct{ Client }

var (
	hotKey  = Key{"id": &types.AttributeValueMemberS{Value: "3f2504e0-4f89-41d3-9a0c-0305e82c3301"}}
	hotKey2 = Key{
		"tenant": &types.AttributeValueMemberS{Value: "acme-corp"},
		"seq":    &types.AttributeValueMemberN{Value: "123456789012"},
	}
	hotSink  string
	hotInput *dynamodb.UpdateItemInput
)

func hotLedger(b *testing.B) *core {
	l, err := NewInline(noDB{}, "users", []string{"id"})
	if err != nil {
		b.Fatal(err)
	}
	return l.core
}

func hotRequest() ClaimRequest {
	now := time.UnixMilli(1_780_000_000_000)
	return ClaimRequest{Key: hotKey, ID: newID(), Owner: "host-1234-abcd", Slot: 3, Token: 42, Now: now, Until: now.Add(time.Minute)}
}

// BenchmarkClaimExpression builds one claim's UpdateItem (per item without batched claims, per
// transaction item with them).
func BenchmarkClaimExpression(b *testing.B) {
	l := hotLedger(b)
	r := hotRequest()
	b.ReportAllocs()
	for b.Loop() {
		hotInput = l.input(OpClaim, hotKey, l.requestVals(r))
	}
}

// BenchmarkCompleteExpression builds one fenced completion.
func BenchmarkCompleteExpression(b *testing.B) {
	l := hotLedger(b)
	c := Claim{Key: hotKey, ID: newID(), Owner: "host-1234-abcd", Slot: 3, Token: 42, Attempt: 1}
	now := time.UnixMilli(1_780_000_000_000)
	b.ReportAllocs()
	for b.Loop() {
		hotInput = l.input(OpComplete, hotKey, values{vClaim: attrS(c.ID), vNow: attrMillis(now)})
	}
}

// BenchmarkCompleteOnlyExpression builds one complete-only write.
func BenchmarkCompleteOnlyExpression(b *testing.B) {
	l := hotLedger(b)
	r := hotRequest()
	b.ReportAllocs()
	for b.Loop() {
		hotInput = l.input(OpCompleteOnly, hotKey, l.requestVals(r))
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

// BenchmarkItemEffectPlan renders a transform's item effect (two attributes set, one removed: the
// bench's split of a name) for its merge into the completion's UpdateItem, once per item.
func BenchmarkItemEffectPlan(b *testing.B) {
	l := hotLedger(b)
	b.ReportAllocs()
	for b.Loop() {
		e := (&Effects{}).Item(Set("first", "Given7"), Set("last", "Family7"), Remove("name"))
		p, err := l.planEffects(hotKey, e)
		if err != nil || p == nil {
			b.Fatal(err)
		}
	}
}
