package cli_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// TestBindEnvSkipsItemEnv: the variables `work --exec` sets for CMD (DYNAPART_KEY, ...) are one
// item's, not settings: a command with flags of those names (--key) takes none of them, while
// other DYNAPART_<FLAG> variables still set their flags.
func TestBindEnvSkipsItemEnv(t *testing.T) {
	env := map[string]string{"DYNAPART_TABLE": "users"}
	item := cli.ItemEnv{Key: []byte(`{"id":"item-1"}`), Slot: 3, Attempt: 2, Token: 7, IdempotencyKey: "ik", Version: "v1"}
	cmd := &cobra.Command{Use: "x"}
	cmd.Flags().String("table", "", "")
	var flags []string
	for _, kv := range item.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
		flag := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "DYNAPART_")), "_", "-")
		require.Equal(t, name, cli.EnvName(flag))
		cmd.Flags().String(flag, "", "")
		flags = append(flags, flag)
	}
	require.Contains(t, flags, "key", "DYNAPART_KEY is among them (the public contract of --exec)")
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	require.NoError(t, cli.BindEnv(cmd, lookup))
	require.Equal(t, "users", cmd.Flags().Lookup("table").Value.String())
	for _, f := range flags {
		require.False(t, cmd.Flags().Changed(f), "--%s was set from %s", f, cli.EnvName(f))
	}
}

// TestBindEnvKeyOutsideExec (from a review): outside a command that `work --exec` runs (no
// DYNAPART_IDEMPOTENCY_KEY), DYNAPART_KEY still sets --key, e.g. init's key spec; skipping it
// everywhere made `DYNAPART_KEY=pk:N dynapart init` create a table keyed id:S without a word.
func TestBindEnvKeyOutsideExec(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	cmd.Flags().String("key", "id:S", "")
	env := map[string]string{"DYNAPART_KEY": "pk:N"}
	require.NoError(t, cli.BindEnv(cmd, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	require.Equal(t, "pk:N", cmd.Flags().Lookup("key").Value.String())
}

// TestFromEnvNamesTheVariable: a usage error naming a flag that DYNAPART_<FLAG> set names the
// variable too (the command line does not show it); a flag given on the command line, one it does
// not name (--page, not --page-size), and errors other than usage errors are left as they are.
func TestFromEnvNamesTheVariable(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	cmd.Flags().Float64("max-wcu", 0, "")
	cmd.Flags().Int("page", 0, "")
	cmd.Flags().Int("page-size", 0, "")
	require.NoError(t, cmd.Flags().Parse([]string{"--page-size", "5"}))
	env := map[string]string{"DYNAPART_MAX_WCU": "0", "DYNAPART_PAGE": "3", "DYNAPART_PAGE_SIZE": "7"}
	require.NoError(t, cli.BindEnv(cmd, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))

	err := cli.FromEnv(cmd, cli.Usagef("--max-wcu must be > 0, got 0"))
	require.True(t, cli.IsUsage(err))
	require.EqualError(t, err, "--max-wcu must be > 0, got 0 (--max-wcu from DYNAPART_MAX_WCU)")
	err = cli.FromEnv(cmd, cli.Usagef("--page-size: must be > 0; --max-wcu too"))
	require.EqualError(t, err, "--page-size: must be > 0; --max-wcu too (--max-wcu from DYNAPART_MAX_WCU)",
		"--page-size came from the command line, --page is not named")
	err = cli.FromEnv(cmd, cli.Usagef("--page: bad"))
	require.EqualError(t, err, "--page: bad (--page from DYNAPART_PAGE)")
	runtime := errors.New("--max-wcu: a runtime failure")
	require.Same(t, runtime, cli.FromEnv(cmd, runtime))
}
