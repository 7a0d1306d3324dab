package work_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestIndexModeWarnsOfAnEmptyIndex: an index-mode worker over a table whose items are not in the
// pending index (nothing the CLI writes marks them) processed nothing and exited 0 without a word
// (helper-68); it now warns, naming what puts an item in the index. Once the items are marked the
// warning is gone and the worker handles them; once they are done it stays gone.
func TestIndexModeWarnsOfAnEmptyIndex(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	table, leases := clitest.TableNames(t)
	c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases, "--index")
	c.MustRun("seed", "--table", table, "--items", "3")
	work := []string{"work", "--table", table, "--lease-table", leases, "--mode", "index", "--once", "--progress", "none"}

	_, stderr, code := c.Run(append(work, "--workers", "1")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "index mode reads only the pending index, which DescribeTable says is empty while the table has unfinished items")
	require.Contains(t, stderr, `"completed":0`)

	for i := range 3 { // mark the items pending: shard 0 of the index
		_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key:                       seedKey(i),
			UpdateExpression:          aws.String("SET dp_shard = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: "0"}}})
		require.NoError(t, err)
	}
	_, stderr, code = c.Run(append(work, "--group", table+"/marked", "--workers", "1")...)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "index mode reads only the pending index")
	require.Contains(t, stderr, `"completed":3`)

	// The queue drained (every item done, out of the index) is index mode's idle state: no warning
	// (helper-69 found it warned on every start then).
	_, stderr, code = c.Run(append(work, "--group", table+"/again", "--workers", "1")...)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "index mode reads only the pending index")
}
