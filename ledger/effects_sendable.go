package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/ddbnum"
)

// Values no write can carry, found before anything is sent: DynamoDB's own refusal of them names
// only the value's placeholder (":0"), not the attribute, and the SDK cannot send a nil one.

// unsendable says where v holds what no write can carry, as a path below v, and why (a phrase
// that follows the path; "" when there is none): a nil attribute value (a typed nil, which a
// failed type assertion on an item's Attrs gives; the SDK's size and JSON read the nil pointer), a
// NULL whose Value is false, a binary (B, or a BS member) whose Value is nil, a map with an empty
// attribute name, a number DynamoDB does not store (ddbnum.Check), a set that is empty or holds
// a member twice, or text that is not UTF-8 (a string, a string set's member, a map's attribute
// name: notUTF8Why).
func unsendable(v types.AttributeValue) (path, why string) {
	if v == nil || nilPointer(v) {
		return "", nilWhy
	}
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		if !utf8.ValidString(x.Value) {
			return "", notUTF8Why
		}
	case *types.AttributeValueMemberN:
		return "", numberWhy(x.Value)
	case *types.AttributeValueMemberNULL:
		if !x.Value {
			return "", nullFalseWhy
		}
	case *types.AttributeValueMemberB:
		if x.Value == nil {
			return "", nilBinaryWhy
		}
	case *types.AttributeValueMemberSS:
		return setWhy(x.Value, func(s string) (string, string) {
			if !utf8.ValidString(s) {
				return "", notUTF8Why
			}
			return s, ""
		})
	case *types.AttributeValueMemberNS:
		return setWhy(x.Value, func(n string) (string, string) {
			c, _ := ddbnum.Canonical(n) // 1 and 1.0 are one member
			return c, numberWhy(n)
		})
	case *types.AttributeValueMemberBS:
		return setWhy(x.Value, func(b []byte) (string, string) {
			if b == nil {
				return "", nilBinaryWhy
			}
			return string(b), ""
		})
	case *types.AttributeValueMemberL:
		for i, e := range x.Value {
			if p, why := unsendable(e); why != "" {
				return fmt.Sprintf("[%d]%s", i, p), why
			}
		}
	case *types.AttributeValueMemberM:
		return attrsUnsendable(x.Value)
	}
	return "", ""
}

// attrsUnsendable is unsendable for a map of attributes (an item, a key, a map value); the path
// starts with the attribute's name, quoted.
func attrsUnsendable(m map[string]types.AttributeValue) (path, why string) {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		switch {
		case name == "":
			return `[""]`, emptyNameWhy
		case !utf8.ValidString(name):
			return fmt.Sprintf("[%q]", name), notUTF8Why
		}
		if p, why := unsendable(m[name]); why != "" {
			return fmt.Sprintf("[%q]%s", name, p), why
		}
	}
	return "", ""
}

// setWhy is unsendable for a set's members, which member reads as an identity (members of one
// identity are one member) and why DynamoDB does not store it ("" when it does).
func setWhy[T any](members []T, member func(T) (id, why string)) (path, why string) {
	if len(members) == 0 {
		return "", emptySetWhy
	}
	seen := make(map[string]bool, len(members))
	for i, m := range members {
		id, why := member(m)
		switch {
		case why != "":
			return "[" + strconv.Itoa(i) + "]", why
		case seen[id]:
			return "[" + strconv.Itoa(i) + "]", duplicateWhy
		}
		seen[id] = true
	}
	return "", ""
}

// numberWhy is why DynamoDB does not store the number n; "" when it does.
func numberWhy(n string) string {
	if err := ddbnum.Check(n); err != nil {
		return fmt.Sprintf("is the number %q, which DynamoDB does not store: %v", ddbnum.Short(n), err)
	}
	return ""
}

const (
	nilWhy       = "is a nil attribute value (a failed type assertion gives one): give a value, or leave it out"
	emptyNameWhy = "is an empty attribute name: DynamoDB refuses one in a map as in an item"
	emptySetWhy  = "is an empty set: DynamoDB takes none"
	duplicateWhy = "is a set's member given twice: DynamoDB refuses a set with a duplicate"
	nullFalseWhy = "is a NULL whose Value is false: DynamoDB takes only NULL true (&types.AttributeValueMemberNULL{Value: true})"
	nilBinaryWhy = "is a binary whose Value is nil, which the SDK sends as no value: give []byte{} for an empty one"
)
