package scan_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
)

// TestPendingIndexNeedsAllAttributes: an existing index of the pending index's name and keys that
// projects only the keys is refused (index mode would hand handlers part of each item), naming
// the projection; before, it was taken as it was.
func TestPendingIndexNeedsAllAttributes(t *testing.T) {
	ctx := context.Background()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	_, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("shard"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS},
		},
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
			IndexName: aws.String("pending"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("shard"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("id"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}}},
	})
	require.NoError(t, err)
	err = scan.CreatePendingIndex(ctx, db, table, "pending", "shard")
	require.ErrorIs(t, err, scan.ErrIndexConflict)
	require.ErrorContains(t, err, "projects KEYS_ONLY attributes: index mode needs ALL")

	// A scanner (and so a worker) in index mode over it is refused before reading.
	sc, err := scan.New(indexConfig(db, table, 1, 0))
	require.NoError(t, err)
	err = sc.Run(ctx, func(context.Context, *scan.Page) error { t.Fatal("read a page"); return nil })
	var ce *scan.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "IndexName", ce.Field)
	require.ErrorContains(t, err, "projects KEYS_ONLY attributes")
}
