package seed

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

// tableEmpty tells a table with no item (written in batches: init then seed, as README's session
// does, took 6 times longer one conditional PutItem at a time) from one with an item.
func TestTableEmpty(t *testing.T) {
	ctx := context.Background()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	empty, err := tableEmpty(ctx, db, table)
	require.NoError(t, err)
	require.True(t, empty)
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
		Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "a"}}})
	require.NoError(t, err)
	empty, err = tableEmpty(ctx, db, table)
	require.NoError(t, err)
	require.False(t, empty)
	_, err = tableEmpty(ctx, db, table+"-missing")
	require.ErrorContains(t, err, "-missing")
}
