package cli_test

import (
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
