package demo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestDemo runs a small `dynapart demo` as a process against the test DynamoDB: the SIGKILL, the
// standby's takeover and the scale-up from 3 to 4 slots with a worker that joins without
// --workers; it must exit 0 with every item done once and the group at N=4, plan epoch 1.
func TestDemo(t *testing.T) {
	if testing.Short() && !ddbtest.InCI() {
		t.Skip("runs five worker processes for about a minute")
	}
	ddbtest.Client(t)
	c := clitest.New(t)
	cmd := c.Command("demo", "--items", "4000", "--lease-ttl", "2s", "--kill-at", "0.25")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("demo took %s", time.Since(start).Round(time.Second))
	for _, want := range []string{
		"!! ", "SIGKILL worker-",
		"dynapart scale --group ", "3 -> 4 slots (plan epoch 1)",
		"started worker-4 without --workers: joining at N=4",
		"the group ended at N=4, plan epoch 1",
		"completed twice:   0", "missing:           0",
		"OK: every item done exactly once, despite the SIGKILL and the resize to 4 slots.",
	} {
		require.Contains(t, string(out), want)
	}
}

func TestDemoBadUsage(t *testing.T) {
	c := clitest.New(t)
	for _, args := range [][]string{
		{"demo", "--scale-up", "-1"},
		{"demo", "--workers", "3", "--slots", "3"},
	} {
		_, errOut, code := c.Run(args...)
		require.Equal(t, cli.ExitUsage, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "--scale-up >= 0")
	}
}
