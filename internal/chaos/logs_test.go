package chaos

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/worker"
)

const (
	secretValue  = "s3cr3t-PAYLOAD-7f1c"
	secretKey    = "KEYVALUE-9d2e"
	accessKeyID  = "AKIACHAOSTESTKEY0001"
	secretAccess = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYCHAOSKEY01"
)

// TestLogsHoldNoItemContentsOrCredentials: at info level, neither the library's logs nor the CLI's
// stderr show an item's attributes, its key, or the AWS credentials, also when handlers fail and
// items are retried and dead-lettered.
func TestLogsHoldNoItemContentsOrCredentials(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	ctx := context.Background()
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	leases := leaseTable(t, db)
	for i := range 20 {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s-%02d", secretKey, i)}, "password": &types.AttributeValueMemberS{Value: secretValue}}})
		require.NoError(t, err)
	}
	check := func(where, logs string) {
		t.Helper()
		require.NotEmpty(t, logs, where)
		for _, s := range []string{secretValue, secretKey, accessKeyID, secretAccess} {
			require.NotContains(t, logs, s, "%s logs at info level show %q", where, s)
		}
	}

	t.Run("library", func(t *testing.T) {
		cfg := ddbtest.Config(t)
		cfg.Credentials = credentials.NewStaticCredentialsProvider(accessKeyID, secretAccess, "")
		client := dynamodb.NewFromConfig(cfg)
		var buf syncBuf
		w, err := worker.New(worker.Config{Client: client, Table: table, LeaseTable: leases, Workers: 1, Once: true, Job: "lib",
			Group: table + "/lib", MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond,
			PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		require.NoError(t, err)
		var n atomic.Int64 // handlers run concurrently
		require.NoError(t, w.Run(ctx, func(_ context.Context, it worker.Item) error {
			if n.Add(1)%3 == 0 {
				return fmt.Errorf("handler failed") // retried, some dead-lettered
			}
			return nil
		}))
		check("worker.Config.Logger", buf.String())
	})

	t.Run("cli", func(t *testing.T) {
		cmd := exec.Command(binary, "work", "--endpoint", ddbtest.Endpoint(t), "--table", table, "--lease-table", leases,
			"--workers", "1", "--once", "--group", table+"/cli", "--max-attempts", "2", "--retry-backoff", "10ms",
			"--poll-interval", "100ms", "--progress", "log", "--log-level", "info",
			"--exec", `cat >/dev/null; case "$DYNAPART_KEY" in *5*) echo "handler says no" >&2; exit 1;; esac`)
		cmd.Env = append(cliEnv(), "AWS_ACCESS_KEY_ID="+accessKeyID, "AWS_SECRET_ACCESS_KEY="+secretAccess, "AWS_REGION=us-east-1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
		check("dynapart work stderr", stderr.String())
		check("dynapart work stdout+stderr", stdout.String()+stderr.String())
	})
}

// syncBuf is a log buffer safe for the worker's concurrent writes.
type syncBuf struct{ buf bytes.Buffer }

func (b *syncBuf) Write(p []byte) (int, error) { return lockedWrite(&b.buf, p) }
func (b *syncBuf) String() string              { return lockedString(&b.buf) }
