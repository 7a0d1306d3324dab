package ledger

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestExprCompareNumbersExactly: numbers compare by their exact value, to DynamoDB's 38
// significant digits and past them, whatever their spelling; two keys that differ only in a
// digit a float64 (or a 64-bit big.Float) cannot hold are two items.
func TestExprCompareNumbersExactly(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"12345678901234567890123", "12345678901234567890124", -1},
		{"12345678901234567890124", "12345678901234567890123", 1},
		{"12345678901234567890123", "1.2345678901234567890123e22", 0},
		{"9.9999999999999999999999999999999999999e125", "9.9999999999999999999999999999999999998e125", 1},
		{"0.00000000000000000000000000000000000001", "0.00000000000000000000000000000000000002", -1},
		{"-12345678901234567890123", "-12345678901234567890124", 1},
		{"1.50", "1.5", 0},
		{"-0", "0", 0},
		{"10", "9", 1}, // both int64: the fast path
	} {
		d, ok := compareNumbers(c.a, c.b)
		require.True(t, ok, "%s vs %s", c.a, c.b)
		require.Equal(t, c.want, d, "%s vs %s", c.a, c.b)
	}
	_, ok := compareNumbers("12", "twelve")
	require.False(t, ok, "text that is no number is not ordered")
}

// TestKeyNumbersPastDigit19: sameKey tells apart two N keys that differ in their 23rd digit, so a
// write to the neighbour of the item is not refused as a write to the item itself.
func TestKeyNumbersPastDigit19(t *testing.T) {
	n := func(v string) Key { return Key{"id": &types.AttributeValueMemberN{Value: v}} }
	require.False(t, sameKey(n("12345678901234567890123"), n("12345678901234567890124"), []string{"id"}))
	require.True(t, sameKey(n("12345678901234567890123"), n("1.2345678901234567890123E22"), []string{"id"}))
}
