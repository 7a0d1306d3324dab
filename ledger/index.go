package ledger

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// removeAttr removes attr from the item key of table, when the item exists.
func (l *core) removeAttr(ctx context.Context, table string, key Key, attr string) error {
	var cond strings.Builder
	names := map[string]string{"#s": attr}
	for i, k := range keysSorted(key) {
		if i > 0 {
			cond.WriteString(" AND ")
		}
		n := "#k" + strconv.Itoa(i)
		names[n] = k
		cond.WriteString("attribute_exists(" + n + ")")
	}
	_, err := l.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key, UpdateExpression: aws.String("REMOVE #s"),
		ConditionExpression: aws.String(cond.String()), ExpressionAttributeNames: names,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
	case !errors.As(err, &ccf):
		return l.wrapErr("leave the pending index", table, err)
	}
	return nil
}
