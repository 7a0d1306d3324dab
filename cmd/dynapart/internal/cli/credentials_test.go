package cli

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// Without any AWS credentials a command stops at once with exit 2 saying where the SDK looks;
// before, a worker took the failed requests for an outage of DynamoDB and retried them for
// --outage-timeout (15 minutes). DynamoDB Local's loopback endpoint needs none.
func TestNoCredentialsIsBadConfiguration(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true") // the chain's last step, the instance's role, fails at once
	g := &Globals{Endpoint: "http://dynamodb.example:8000", Region: "us-east-1", IO: OSStdio()}
	_, err := g.DynamoClient(context.Background())
	require.Error(t, err)
	require.True(t, IsUsage(err), "%v", err)
	require.ErrorContains(t, err, "no AWS credentials")
	require.ErrorContains(t, err, "AWS_PROFILE")

	g.Endpoint = "http://127.0.0.1:8000"
	_, err = g.DynamoClient(context.Background())
	require.NoError(t, err)

	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	g.Endpoint = "http://dynamodb.example:8000"
	_, err = g.DynamoClient(context.Background())
	require.NoError(t, err)
}
