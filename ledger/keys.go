package ledger

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynapart/dynapart/internal/ddbnum"
)

// itemKeyOf returns the key attributes of key (only those, in a new map) after checking that each
// is there and is a string, number or binary.
func (l *core) itemKeyOf(key Key) (Key, error) {
	out := make(Key, len(l.keyAttrs))
	for _, name := range l.keyAttrs {
		v, ok := key[name]
		if !ok {
			return nil, fmt.Errorf("dynapart: %s: item key %v lacks key attribute %q", l.name, keysSorted(key), name)
		}
		switch v.(type) {
		case *types.AttributeValueMemberS, *types.AttributeValueMemberN, *types.AttributeValueMemberB:
		default:
			return nil, fmt.Errorf("dynapart: %s: key attribute %q is a %T, want a string, number or binary", l.name, name, v)
		}
		out[name] = v
	}
	return out, nil
}

func keysSorted(k Key) []string { return slices.Sorted(maps.Keys(k)) }

// rowID identifies a state row by its key, to match BatchGetItem results and repeated requests.
func (l *core) rowID(rowKey map[string]types.AttributeValue) string {
	s, err := encodeKeyParts(rowKey, l.row.keyAttrs)
	if err != nil {
		return ""
	}
	return s
}

// encodeKeyParts is the canonical, injective text form of an item key: one part per key
// attribute in attrs order, each "<type>:<length>:<value>" where type is S, N or B, the value is
// the string, the canonical number or the standard base64 of the bytes, and length is the
// value's length in bytes. The length prefix makes the join unambiguous, the type keeps a string
// "abc" apart from the bytes "abc", and numbers are canonical ("1.50" and "15E-1" are the same
// DynamoDB key, so they encode alike).
func encodeKeyParts(key map[string]types.AttributeValue, attrs []string) (string, error) {
	var b strings.Builder
	for i, name := range attrs {
		var typ, val string
		switch v := key[name].(type) {
		case *types.AttributeValueMemberS:
			typ, val = "S", v.Value
		case *types.AttributeValueMemberN:
			n, err := ddbnum.Canonical(v.Value)
			if err != nil {
				return "", fmt.Errorf("dynapart: key attribute %q: %w", name, err)
			}
			typ, val = "N", n
		case *types.AttributeValueMemberB:
			typ, val = "B", base64.StdEncoding.EncodeToString(v.Value)
		case nil:
			return "", fmt.Errorf("dynapart: item key lacks key attribute %q", name)
		default:
			return "", fmt.Errorf("dynapart: key attribute %q is a %T, want a string, number or binary", name, v)
		}
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(typ)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(val)))
		b.WriteByte(':')
		b.WriteString(val)
	}
	return b.String(), nil
}

// hashedKeyPart replaces a key encoding too long for a partition key by its SHA-256, under the
// type H that no plain encoding starts with.
func hashedKeyPart(enc string) string {
	sum := sha256.Sum256([]byte(enc))
	return "H:" + hex.EncodeToString(sum[:])
}

// KeyText is an item key for logs and errors: the canonical encoding of its attributes sorted by
// name (see encodeKeyParts). A key that has no canonical encoding (a number that does not parse,
// an attribute that is not S, N or B) is written as it is, attribute by attribute: never as
// pointers.
func KeyText(k Key) string {
	s, err := encodeKeyParts(k, keysSorted(k))
	if err != nil {
		return rawKeyText(k)
	}
	return s
}

// rawKeyText is "{name=TYPE:value, ...}" with the values as given (numbers not canonical); a type
// other than S, N or B is written by its Go type's name alone.
func rawKeyText(k Key) string {
	parts := make([]string, 0, len(k))
	for _, name := range keysSorted(k) {
		var v string
		switch x := k[name].(type) {
		case *types.AttributeValueMemberS:
			v = "S:" + strconv.Quote(x.Value)
		case *types.AttributeValueMemberN:
			v = "N:" + strconv.Quote(x.Value)
		case *types.AttributeValueMemberB:
			v = "B:" + base64.StdEncoding.EncodeToString(x.Value)
		default:
			v = fmt.Sprintf("%T", x)
		}
		parts = append(parts, name+"="+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
