package cli

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// credentialsWait bounds the lookup of credentials at start (the SDK's chain may end at the EC2
// instance metadata service, which a machine outside EC2 may not answer).
const credentialsWait = 30 * time.Second

// checkCredentials gets cfg's credentials once, before any command reads DynamoDB: without any
// (no variables, profile, web identity, container or instance role) every request fails the same
// way, and a worker, which waits through an outage of DynamoDB at its start, would retry for
// --outage-timeout. It is bad configuration instead (exit 2), and the error says where the SDK
// looks. The credentials it gets stay in cfg's cache for the client's requests.
func checkCredentials(ctx context.Context, cfg aws.Config) error {
	if cfg.Credentials == nil {
		return nil // anonymous: the SDK signs nothing, and says so if DynamoDB refuses
	}
	ctx, cancel := context.WithTimeout(ctx, credentialsWait)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded {
			return err // the command itself was stopped
		}
		return Usagef("no AWS credentials: %v; the AWS SDK looks in AWS_ACCESS_KEY_ID and "+
			"AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, a web identity token, then the container's or "+
			"instance's role (for DynamoDB Local, --endpoint http://127.0.0.1:PORT needs none)", err)
	}
	return nil
}
