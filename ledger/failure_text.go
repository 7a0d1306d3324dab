package ledger

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// errorTextNotStored is what a failure write stores instead of the error text when DynamoDB
// refused the write with it (the text would take the item past 400 KB).
const errorTextNotStored = "(error text not stored: the item is near 400 KB)"

// updateFailure sends op's write with the values vals (shape sets what it returns) and, when it
// stores an error text (a retry, a dead letter, a complete-only failure record) that DynamoDB
// refuses as invalid, once more with errorTextNotStored instead: an item that a handler's effect
// or the text itself would take past 400 KB still reaches its state. A refusal of the second
// write is returned (IsValidation): the item cannot take the state at all. A refusal is no
// unknown outcome: nothing of the first write landed.
func (l *core) updateFailure(ctx context.Context, op Op, rowKey Key, vals values, shape func(*dynamodb.UpdateItemInput)) (*dynamodb.UpdateItemOutput, error) {
	in := l.input(op, rowKey, vals)
	shape(in)
	out, err := l.update(ctx, in)
	if !IsValidation(err) || vals[vError] == nil || attrStr(vals[vError]) == errorTextNotStored {
		return out, err
	}
	vals[vError] = attrS(errorTextNotStored)
	in = l.input(op, rowKey, vals)
	shape(in)
	return l.update(ctx, in)
}

// allOldOnFailure asks a write refused by its condition for the row's image.
func allOldOnFailure(in *dynamodb.UpdateItemInput) {
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
}
