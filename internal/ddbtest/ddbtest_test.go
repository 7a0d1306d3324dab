package ddbtest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func TestCreateTableIsUniqueAndUsable(t *testing.T) {
	db := Client(t)
	a := CreateTable(t, db, Key{Name: "id", Type: "S"})
	b := CreateTable(t, db, Key{Name: "pk", Type: "S"}, Key{Name: "sk", Type: "N"})
	require.NotEqual(t, a, b)
	ctx := context.Background()
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(a),
		Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "x"}}})
	require.NoError(t, err)
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(b)})
	require.NoError(t, err)
	require.Len(t, out.Table.KeySchema, 2)
}
