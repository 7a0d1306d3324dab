package capacity

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize approximates DynamoDB's item size: attribute names plus values.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + ValueSize(v)
	}
	return n
}

// ValueSize approximates the size DynamoDB counts for one attribute value (a string or binary: its
// bytes).
func ValueSize(v types.AttributeValue) int {
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
			n += 1 + len(k) + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + ValueSize(e)
		}
		return n
	}
	return 1 // BOOL, NULL
}

// NumberSize is what DynamoDB counts for a number: its significant digits in pairs aligned on the
// decimal point (110 is 01|10: 2 pairs; 1.5 is 01.50: 2), plus 1 byte, plus 1 when negative, at
// most 21.
func NumberSize(s string) int {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, _ = strconv.Atoi(s[i+1:])
		s = s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits, point := intPart+frac, len(intPart)+exp
	trimmed := strings.TrimLeft(digits, "0")
	point -= len(digits) - len(trimmed)
	digits = strings.TrimRight(trimmed, "0")
	if digits == "" {
		return 1 // zero
	}
	n := len(digits)
	if point%2 != 0 { // a digit alone in the pair left of the point's pairs
		n++
	}
	size := (n+1)/2 + 1
	if neg {
		size++
	}
	return min(size, 21)
}

// sumOf adds size(x) over xs.
func sumOf[T any](xs []T, size func(T) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}
