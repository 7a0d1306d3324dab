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

// TestForEachBackendBindsTheHarness: inside ForEachBackend, Endpoint and Client talk to that
// backend (a table made on one is not seen on the other), and Need skips what it lacks.
func TestForEachBackendBindsTheHarness(t *testing.T) {
	seen := map[string]string{}
	var tables []string
	ForEachBackend(t, func(t *testing.T, b Backend) {
		seen[b.Name] = Endpoint(t)
		db := Client(t)
		tables = append(tables, CreateTable(t, db, Key{Name: "id", Type: "S"}))
		out, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		require.NoError(t, err)
		for _, other := range tables[:len(tables)-1] {
			require.NotContains(t, out.TableNames, other, "backend %s sees another backend's table", b.Name)
		}
		if b.Name == "moto" {
			require.False(t, b.Has(CapConcurrentIsolation))
			t.Run("need", func(t *testing.T) {
				Need(t, CapConcurrentIsolation)
				t.Error("Need did not skip on a backend that lacks the capability")
			})
		}
	})
	if len(seen) == 2 {
		require.NotEqual(t, seen["dynamodb-local"], seen["moto"])
	}
}
