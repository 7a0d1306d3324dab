package cli_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestNoSDKWarningsAgainstDynamoDBLocal: init on a new table (its DescribeTable answers
// ResourceNotFound, which DynamoDB Local sends without X-Amz-Crc32) prints no SDK WARN line, with
// the endpoint from --endpoint or from AWS_ENDPOINT_URL_DYNAMODB.
func TestNoSDKWarningsAgainstDynamoDBLocal(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	leases := ddbtest.TableName(t, "lease")
	ddbtest.DeleteOnCleanup(t, db, leases)
	for _, viaEnv := range []bool{false, true} {
		table := ddbtest.TableName(t, "")
		ddbtest.DeleteOnCleanup(t, db, table)
		cmd := c.Command("init", "--table", table, "--lease-table", leases)
		if viaEnv {
			cmd.Env = append(cmd.Env, "DYNAPART_ENDPOINT=", "AWS_ENDPOINT_URL_DYNAMODB="+c.Endpoint,
				"AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=y", "AWS_REGION=us-east-1")
		}
		var e bytes.Buffer
		cmd.Stderr = &e
		require.NoError(t, cmd.Run(), e.String())
		require.Contains(t, e.String(), "created")
		require.NotContains(t, e.String(), "WARN", "endpoint from env: %v", viaEnv)
	}
}
