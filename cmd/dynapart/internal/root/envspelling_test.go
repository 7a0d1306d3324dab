package root_test

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/root"
)

// TestMisspeltEnv: a DYNAPART_ variable a letter or two from a flag's is warned of, naming the
// flag's variable; the project's own other variables (tests, make, examples) and another
// command's flags are not, in any command.
func TestMisspeltEnv(t *testing.T) {
	rootCmd := root.New(cli.Stdio{Out: io.Discard, Err: io.Discard, LookupEnv: os.LookupEnv})
	work, _, err := rootCmd.Find([]string{"work"})
	require.NoError(t, err)
	got := cli.MisspeltEnv(work, []string{"DYNAPART_LEASE_TL=5s", "DYNAPART_MAX_WCUS=3", "DYNAPART_WORKERS=2", "DYNAPART_JOBS=x", "OTHER=1"})
	require.Equal(t, []cli.Misspelt{
		{Name: "DYNAPART_JOBS", Meant: "DYNAPART_JOB", Flag: "--job"},
		{Name: "DYNAPART_LEASE_TL", Meant: "DYNAPART_LEASE_TTL", Flag: "--lease-ttl"},
		{Name: "DYNAPART_MAX_WCUS", Meant: "DYNAPART_MAX_WCU", Flag: "--max-wcu"},
	}, got)

	ours := []string{"DYNAPART_CACHE_DIR", "DYNAPART_SEED", "DYNAPART_SHARDS", "DYNAPART_SCREENSHOT_DIR", "DYNAPART_PLOT_DIR",
		"DYNAPART_MODEL_REPORT", "DYNAPART_CHROMIUM", "DYNAPART_EXAMPLE_CHILD", "DYNAPART_BENCH_STEAL_CLI", "DYNAPART_WRITE_RATE_RUN",
		"DYNAPART_TEST_ENDPOINT", "DYNAPART_TEST_BACKENDS", "DYNAPART_KEY", "DYNAPART_SLOT", "DYNAPART_TOKEN", "DYNAPART_ATTEMPT",
		"DYNAPART_IDEMPOTENCY_KEY", "DYNAPART_VERSION", "DYNAPART_TABLE", "DYNAPART_MODE", "DYNAPART_ITEMS"}
	var env []string
	for _, n := range ours {
		env = append(env, n+"=1")
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		require.Empty(t, cli.MisspeltEnv(c, env), "dynapart %s", c.CommandPath())
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd)
}

// TestMisspeltEnvWarns: the warning reaches stderr before the command's checks (here of --table).
func TestMisspeltEnvWarns(t *testing.T) {
	var errOut bytes.Buffer
	env := map[string]string{"DYNAPART_LEASE_TL": "5s"}
	sio := cli.Stdio{Out: io.Discard, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Environ: func() []string { return []string{"DYNAPART_LEASE_TL=5s"} }}
	require.Equal(t, cli.ExitUsage, root.Run([]string{"work", "--log-format", "text", "--table", "a"}, sio))
	require.True(t, strings.Contains(errOut.String(), "DYNAPART_LEASE_TL sets nothing (ignored): did you mean DYNAPART_LEASE_TTL (--lease-ttl)?"), errOut.String())
}
