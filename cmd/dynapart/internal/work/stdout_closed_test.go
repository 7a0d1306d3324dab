package work_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestOutputClosed: `dynapart work ... | head -1`. Once the reader of the worker's output has
// exited, the worker stops as for SIGTERM (claims released, the attempts interrupted by it not
// counted) and exits 1 naming the cause, instead of counting a failed attempt per item until every
// item is dead-lettered (--exec's output) or dying of SIGPIPE at its own next line with its
// claims left to expire (--progress json, or stderr into the same pipe). A second run handles
// the rest. Both modes.
func TestOutputClosed(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		stderrToo bool // 2>&1
	}{
		{"exec output", []string{"--exec", `cat >/dev/null; echo "item $DYNAPART_KEY"`, "--progress", "none"}, false},
		{"progress json", []string{"--exec", `cat >/dev/null; sleep 0.02`, "--progress", "json"}, false},
		{"stderr too", []string{"--exec", `cat >/dev/null; echo "item $DYNAPART_KEY"`, "--progress", "none"}, true},
	}
	for _, tc := range cases {
		for _, mode := range [][]string{nil, {"--complete-only"}} {
			t.Run(tc.name+" "+modeName(mode), func(t *testing.T) {
				outputClosed(t, append(tc.args, mode...), tc.stderrToo, mode)
			})
		}
	}
}

func modeName(mode []string) string {
	if len(mode) == 0 {
		return "claim"
	}
	return "complete-only"
}

func outputClosed(t *testing.T, args []string, stderrToo bool, mode []string) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 200)
	cmd := c.Command(append([]string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once",
		"--concurrency", "2", "--max-attempts", "1"}, args...)...)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout = w
	var stderr bytes.Buffer // read after Wait, which ends its copy
	cmd.Stderr = &stderr
	if stderrToo {
		cmd.Stderr = w
	}
	require.NoError(t, cmd.Start())
	w.Close()
	_, err = bufio.NewReader(r).ReadString('\n') // head -1
	require.NoError(t, err)
	r.Close()
	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the worker exits non-zero: %v\n%s", err, stderr.String())
	require.Equal(t, 1, exit.ExitCode(), "exit 1, not a signal: %v\n%s", err, stderr.String())
	if !stderrToo {
		require.Contains(t, stderr.String(), "stdout or stderr is closed")
		require.NotContains(t, stderr.String(), "dead-lettered")
	}

	// No attempt was counted as failed: no item is failed, claimed or carries an error.
	out, _, code := c.Run("verify", "--table", table, "--json")
	require.NotEqual(t, 0, code, "the worker stopped before the end: %s", out)
	require.Contains(t, out, `"failed":0`)
	require.Contains(t, out, `"claimed":0`)
	scan, err := ddbtest.Client(t).Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table),
		FilterExpression: aws.String("attribute_exists(dp_error)")})
	require.NoError(t, err)
	require.Zero(t, scan.Count, "items with a failed attempt: %v", scan.Items)

	c.WorkOnce(table, leases, 1, append([]string{"--exec", `cat >/dev/null`}, mode...)...)
	out, _, code = c.Run("verify", "--table", table, "--json")
	require.Equal(t, 0, code, out)
}
