package ledger

import (
	"fmt"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// utf8Reason is the EffectError reason for text that is not UTF-8 at path.
func utf8Reason(what, path string) string { return what + path + " " + notUTF8Why }

// notUTF8Why follows the path of text that is not UTF-8 (a string, a string set's member, a map's
// attribute name: unsendable). The SDK's JSON encoder sends U+FFFD in place of each bad byte, so
// DynamoDB would store other text than the effect says (and Effects.AppliedTo computes), or write
// another item than its key names.
const notUTF8Why = "is not UTF-8: DynamoDB would store U+FFFD in place of its bad bytes, not the text given"

// exprNotUTF8 is why a rendered write is refused for text that is not UTF-8 in its expressions'
// names, or a value no write can carry (unsendable, text that is not UTF-8 included), in its
// condition's (the rest was checked before it was rendered); "" when it is not. A condition sent with U+FFFD would compare
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
	}
	return ""
}
