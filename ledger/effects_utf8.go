package ledger

import (
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// notUTF8 says where v holds text that is not UTF-8 (a string, a string set's member, or a map's
// attribute name), as a path below v ("" for v itself); ok is false when all of it is UTF-8. The
// SDK's JSON encoder sends U+FFFD in place of each bad byte, so DynamoDB would store other text
// than the effect says (and Effects.AppliedTo computes), or write another item than its key names.
func notUTF8(v types.AttributeValue) (path string, bad bool) {
	if v == nil || nilPointer(v) {
		return "", false // a typed nil: refused as such (nilValue), not read here
	}
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return "", !utf8.ValidString(x.Value)
	case *types.AttributeValueMemberSS:
		for i, s := range x.Value {
			if !utf8.ValidString(s) {
				return fmt.Sprintf("[%d]", i), true
			}
		}
	case *types.AttributeValueMemberL:
		for i, e := range x.Value {
			if p, bad := notUTF8(e); bad {
				return fmt.Sprintf("[%d]%s", i, p), true
			}
		}
	case *types.AttributeValueMemberM:
		return attrsNotUTF8(x.Value)
	}
	return "", false
}

// attrsNotUTF8 is notUTF8 for a map of attributes (an item, a key, a map value): the path starts
// with the attribute's name, quoted.
func attrsNotUTF8(m map[string]types.AttributeValue) (path string, bad bool) {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !utf8.ValidString(name) {
			return fmt.Sprintf("[%q]", name), true
		}
		if p, bad := notUTF8(m[name]); bad {
			return fmt.Sprintf("[%q]%s", name, p), true
		}
	}
	return "", false
}

// utf8Reason is the EffectError reason for text that is not UTF-8 at path.
func utf8Reason(what, path string) string {
	return fmt.Sprintf("%s%s is not UTF-8: DynamoDB would store U+FFFD in place of its bad bytes, not the text given", what, path)
}

// exprNotUTF8 is why a rendered write is refused for text that is not UTF-8 in its expressions'
// names or values, or a value no write can carry (unsendable), in its condition's (the rest was
// checked before it was rendered); "" when it is not. A condition sent with U+FFFD would compare
// with other text than the one given.
func exprNotUTF8(ti types.TransactWriteItem) string {
	var names map[string]string
	var values map[string]types.AttributeValue
	switch {
	case ti.Put != nil:
		names, values = ti.Put.ExpressionAttributeNames, ti.Put.ExpressionAttributeValues
	case ti.Update != nil:
		names, values = ti.Update.ExpressionAttributeNames, ti.Update.ExpressionAttributeValues
	case ti.Delete != nil:
		names, values = ti.Delete.ExpressionAttributeNames, ti.Delete.ExpressionAttributeValues
	case ti.ConditionCheck != nil:
		names, values = ti.ConditionCheck.ExpressionAttributeNames, ti.ConditionCheck.ExpressionAttributeValues
	}
	for _, n := range names {
		if !utf8.ValidString(n) {
			return utf8Reason(fmt.Sprintf("the condition's name %q", n), "")
		}
	}
	for _, v := range values {
		if p, why := unsendable(v); why != "" {
			return "a value of the condition" + p + " " + why
		}
		if p, bad := notUTF8(v); bad {
			return utf8Reason("a value of the condition", p)
		}
	}
	return ""
}
