package work_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestExecStdoutClosed: `dynapart work --exec CMD | head -1`. Once the reader of the worker's
// stdout has exited, CMD's next write fails; the worker stops as for SIGTERM (claims released,
// the attempts interrupted by it not counted) and exits 1 naming the cause, instead of counting a
// failed attempt per item until every item is dead-lettered. A second run handles the rest. Both
// modes.
func TestExecStdoutClosed(t *testing.T) {
	for _, mode := range [][]string{nil, {"--complete-only"}} {
		t.Run(fmt.Sprint("mode", mode), func(t *testing.T) { stdoutClosed(t, mode) })
	}
}

func stdoutClosed(t *testing.T, mode []string) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 40)
	script := `cat >/dev/null; echo "item $DYNAPART_KEY"`
	args := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once",
		"--exec", script, "--concurrency", "2", "--max-attempts", "1", "--progress", "none"}
	cmd := c.Command(append(args, mode...)...)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout = w
	var stderr bytes.Buffer // read after Wait, which ends its copy
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n') // head -1
	require.NoError(t, err)
	require.Contains(t, line, "item ")
	r.Close()
	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the worker exits non-zero: %v\n%s", err, stderr.String())
	require.Equal(t, 1, exit.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "stdout (the worker's) is closed")
	require.NotContains(t, stderr.String(), "dead-lettered")

	// No attempt was counted as failed: no item is failed, claimed or carries an error.
	out, _, code := c.Run("verify", "--table", table, "--json")
	require.NotEqual(t, 0, code, "the worker stopped before the end: %s", out)
	require.Contains(t, out, `"failed":0`)
	require.Contains(t, out, `"claimed":0`)
	db := ddbtest.Client(t)
	scan, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table),
		FilterExpression: aws.String("attribute_exists(dp_error)")})
	require.NoError(t, err)
	require.Zero(t, scan.Count, "items with a failed attempt: %v", scan.Items)

	c.WorkOnce(table, leases, 1, append([]string{"--exec", `cat >/dev/null`}, mode...)...)
	out, _, code = c.Run("verify", "--table", table, "--json")
	require.Equal(t, 0, code, out)
}
