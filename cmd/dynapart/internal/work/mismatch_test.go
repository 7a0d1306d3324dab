package work

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// A worker refused by its group exits 2 with the flag named.
func TestGroupMismatchNamesTheFlag(t *testing.T) {
	for field, flag := range map[string]string{
		"n": "--workers", "meta.attr_prefix": "--attr-prefix", "meta.ledger_table": "--ledger-table",
		"meta.complete_only": "--complete-only", "meta.index_name": "--index-name", "meta.shard_attr": "--shard-attr",
	} {
		gm := &lock.GroupMismatchError{Group: "g", Field: field, Have: "a", Want: "b"}
		err := explainMismatch(fmt.Errorf("dynapart: %w", gm))
		var me *groupMismatchError
		require.ErrorAs(t, err, &me)
		require.Equal(t, flag, me.Flag)
		require.ErrorIs(t, err, lock.ErrGroupMismatch)
		require.True(t, cli.IsUsage(err), "exit 2")
	}
	// A follower's group records versions, which --follow sets: the message says so, as a worker
	// that left out --follow never typed --versions (helper-68).
	err := explainMismatch(&lock.GroupMismatchError{Group: "g", Field: "meta.versions", Have: "true", Want: "false"})
	require.Contains(t, err.Error(), "--versions \"false\" differs")
	require.Contains(t, err.Error(), "--follow sets --versions too")
}

// Every worker setting with a flag is a flag of `work`, and a *worker.ConfigError on it becomes a
// usage error (exit 2) naming that flag; a group setting's mismatch names it too.
func TestConfigErrorNamesTheFlag(t *testing.T) {
	work := New(&cli.Globals{})
	for _, s := range worker.Settings() {
		if s.Flag == "" {
			continue
		}
		flag := "--" + s.Flag
		require.NotNil(t, work.Flags().Lookup(s.Flag), "%s: no flag %s", s.Field, flag)
		err := explainSetting(fmt.Errorf("dynapart: %w", &worker.ConfigError{Field: s.Field, Reason: "bad"}))
		var fe *configFlagError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, flag, fe.Flag)
		require.Contains(t, err.Error(), flag)
		require.True(t, cli.IsUsage(err), "exit 2")
		if s.GroupField != "" {
			require.Equal(t, flag, flagOfMismatch(s.GroupField))
		}
	}
	err := explainSetting(&worker.ConfigError{Field: "Clock", Reason: "bad"})
	require.True(t, cli.IsUsage(err), "a field without a flag is still exit 2")
}

// A configuration error's reason names the other settings it mentions by their flags, not by the
// Go fields a CLI user never typed (helper-70: "cannot be combined with CompleteOnly").
func TestConfigErrorReasonNamesFlags(t *testing.T) {
	for reason, want := range map[string]string{
		"cannot be combined with CompleteOnly (complete-only makes no claims)": "cannot be combined with --complete-only (complete-only makes no claims)",
		"must be at least Workers (4) in segment mode":                         "must be at least --workers (4) in segment mode",
		"must exceed 2 x Heartbeat (1s), got 1s":                               "must exceed 2 x --heartbeat (1s), got 1s",
		"required with Follow (a *dynamodbstreams.Client)":                     "required with --follow (a *dynamodbstreams.Client)",
		"cannot be combined with Once (--once): a once-job ends":               "cannot be combined with Once (--once): a once-job ends",
		"Client must be set": "Client must be set", // no flag
	} {
		require.Equal(t, want, flagsInReason(reason))
	}
}
