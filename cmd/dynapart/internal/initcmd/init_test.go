package initcmd_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestInitTakesAnExistingTablesKeySchema: a table made outside dynapart (binary partition key,
// number sort key, nested attributes) is taken as it is; an explicit --key that disagrees is exit 2
// naming both schemas; seed, work and verify then use the table's own keys.
func TestInitTakesAnExistingTablesKeySchema(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "pk", Type: "B"}, ddbtest.Key{Name: "sk", Type: "N"})
	leases := ddbtest.TableName(t, "lease")
	ddbtest.DeleteOnCleanup(t, db, leases)
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberB{Value: []byte{0xff, 0x00, 0x01}}, "sk": &types.AttributeValueMemberN{Value: "-7.5"},
		"profile": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"tags": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}, &types.AttributeValueMemberS{Value: "b"}}}}},
	}})
	require.NoError(t, err)

	_, stderr, code := c.Run("init", "--table", table, "--lease-table", leases)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "key: pk:B sort sk:N")

	for _, args := range [][]string{{"--key", "id:S"}, {"--key", "pk:B"}, {"--key", "pk:B", "--sort-key", "sk:S"}} {
		_, stderr, code = c.Run(append([]string{"init", "--table", table, "--lease-table", leases}, args...)...)
		require.Equal(t, 2, code, "init %v: %s", args, stderr)
		require.Contains(t, stderr, "pk:B sort sk:N", "names the table's schema")
		require.Contains(t, stderr, strings.Join(strings.Fields(strings.ReplaceAll(strings.Join(args[1:], " "), "--sort-key", "sort")), " "), "names the given schema")
	}
	c.MustRun("init", "--table", table, "--lease-table", leases, "--key", "pk:B", "--sort-key", "sk:N")

	c.MustRun("seed", "--table", table, "--items", "40") // writes pk (B) and sk (N) as the table has them
	c.WorkOnce(table, leases, 2)
	out := c.MustRun("verify", "--table", table)
	require.Contains(t, out, "total 41  done 41")
}

// TestInitStream: init --stream turns on an existing table's stream (NEW_AND_OLD_IMAGES), again
// is a no-op; a table streaming another view type is exit 2, named, and left as it is.
func TestInitStream(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	ctx := context.Background()
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	leases := ddbtest.TableName(t, "lease")
	ddbtest.DeleteOnCleanup(t, db, leases)
	_, stderr, code := c.Run("init", "--table", table, "--lease-table", leases, "--stream")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "turned on (NEW_AND_OLD_IMAGES)")
	_, stderr, code = c.Run("init", "--table", table, "--lease-table", leases, "--stream")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "was on (NEW_AND_OLD_IMAGES)")
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	require.Equal(t, types.StreamViewTypeNewAndOldImages, d.Table.StreamSpecification.StreamViewType)

	other := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	_, err = db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(other),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}})
	require.NoError(t, err)
	_, stderr, code = c.Run("init", "--table", other, "--lease-table", leases, "--stream")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "NEW_IMAGE")
	require.Contains(t, stderr, other)
	d, err = db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(other)})
	require.NoError(t, err)
	require.Equal(t, types.StreamViewTypeNewImage, d.Table.StreamSpecification.StreamViewType)
}
