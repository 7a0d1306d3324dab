package capacity

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize approximates DynamoDB's item size: attribute names plus values.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberSS:
		return sumOf(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sumOf(v.Value, NumberSize)
	case *types.AttributeValueMemberBS:
		return sumOf(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	}
	return 1 // BOOL, NULL
}

// NumberSize is what DynamoDB counts for a number: 1 byte per two significant digits (leading
// and trailing zeros are not significant), plus 1.
func NumberSize(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
	digits = strings.Trim(digits, "0")
	return (len(digits)+1)/2 + 1
}

// sumOf adds size(x) over xs.
func sumOf[T any](xs []T, size func(T) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}
