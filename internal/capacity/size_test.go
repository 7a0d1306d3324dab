package capacity

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestItemSizeByDynamoDBRules: sizes as DynamoDB's documentation counts them (a number 1 byte per
// two significant digits plus 1; a map or list 3 bytes plus 1 per element). The number size was
// len/2+1, which undercounted a one-digit number (1 byte, not 2) and a 13-digit time (7, not 8),
// enough to bill an inline item near 1 KB one WCU short per write (found by a review of 33b0099).
func TestItemSizeByDynamoDBRules(t *testing.T) {
	for _, c := range []struct {
		n    string
		want int
	}{{"7", 2}, {"0", 1}, {"12", 2}, {"123", 3}, {"1795907093412", 8}, {"1795907093400", 7}, {"1795907093410", 8}, {"-0.00120", 3}, {"1.5E+3", 2}, {"100000", 2},
		// measured on DynamoDB Local (a review of a6c875b): digits pair on the decimal point, a sign adds 1
		{"110", 3}, {"1.5", 3}, {"0.012", 3}, {"-5", 3}, {"1234567890120", 8}, {"100", 2}, {"1000", 2},
		{"12.5", 3}, {"19.99", 3}, {"0.5", 2}} {
		require.Equal(t, c.want, NumberSize(c.n), c.n)
	}
	item := map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "abc"},                 // 2 + 3
		"n":  &types.AttributeValueMemberN{Value: "7"},                   // 1 + 2
		"ns": &types.AttributeValueMemberNS{Value: []string{"7", "123"}}, // 2 + 2 + 3
		"b":  &types.AttributeValueMemberBOOL{Value: true},               // 1 + 1
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{ // 1 + 3 + (1+1+1)
			"a": &types.AttributeValueMemberBOOL{Value: true}}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNULL{Value: true}}}, // 1 + 3 + (1+1)
	}
	require.Equal(t, 5+3+7+2+7+6, ItemSize(item))
}
