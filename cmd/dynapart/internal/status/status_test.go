package status_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
)

func TestStatusBadUsage(t *testing.T) {
	c := clitest.New(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"status", "--group", "g", "--json", "--interval", "0s"}, "--interval"},
		{[]string{"status", "--group", "g", "--serve", "127.0.0.1:0", "--ledger-interval", "-1s"}, "--ledger-interval"},
		{[]string{"status", "--group", "g", "--serve", "256.0.0.1:1"}, "--serve"},
		{[]string{"status", "--serve", "127.0.0.1:0"}, "--group"},
	} {
		_, stderr, code := c.Run(tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.says)
	}
}

// TestStatusReadsTheLedgerFromTheGroup: the table, ledger and prefix come from the group's meta
// item; a ledger flag that disagrees with it is refused (exit 2) naming the flag and both values.
func TestStatusReadsTheLedgerFromTheGroup(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 30)
	c.WorkOnce(table, leases, 2)
	group := table + "/default"
	status1 := func(extra ...string) status.Document {
		var d status.Document
		out := c.MustRun(append([]string{"status", "--group", group, "--lease-table", leases, "--json"}, extra...)...)
		require.NoError(t, json.Unmarshal([]byte(out), &d))
		return d
	}

	d := status1()
	require.Nil(t, d.Items, "--json reads the ledger only when asked (--table)")
	require.Nil(t, d.Ledger)
	require.Equal(t, int64(30), *d.Throughput.Done, "the slots' counts")
	require.Equal(t, int64(30), *d.Throughput.Total)
	require.Equal(t, "table_estimate", d.Throughput.TotalSource)
	require.Equal(t, 1.0, *d.Throughput.Fraction)
	require.Equal(t, 0.0, *d.Throughput.ETASeconds)
	require.Equal(t, int64(0), *d.Progress.Left)
	require.Equal(t, int64(1), d.Reads.GroupReads)
	require.Nil(t, d.Stream, "a once job follows no stream")
	require.Zero(t, d.Reads.StreamRequests)

	// --table alone: the rest from the group; the ledger's counts with their cost.
	d = status1("--table", table, "--ledger-table", "ignored-for-an-inline-ledger")
	require.Equal(t, int64(30), d.Items.Done)
	require.Equal(t, int64(30), d.Items.Total)
	require.Equal(t, "ledger", d.Throughput.TotalSource)
	require.Equal(t, table, d.Ledger.Table)
	require.Equal(t, "inline", d.Ledger.Kind)
	require.Positive(t, d.Ledger.ReadUnits)
	require.Positive(t, d.Ledger.Requests)
	require.Equal(t, int64(1), d.Reads.LedgerReads)
	require.Equal(t, d.Ledger.ReadUnits, d.Reads.LedgerReadUnits)

	for _, tc := range []struct{ flag, value, recorded string }{
		{"table", "other", table},
		{"ledger", "table", "inline"},
		{"attr-prefix", "xx_", "dp_"},
		{"job", "campaign-2", "default"},
	} {
		for _, mode := range [][]string{{"--json"}, {"--serve", "127.0.0.1:0"}, nil} {
			args := append([]string{"status", "--group", group, "--lease-table", leases, "--" + tc.flag, tc.value}, mode...)
			_, stderr, code := c.Run(args...)
			require.Equal(t, 2, code, "%v: %s", args, stderr)
			require.Contains(t, stderr, `--`+tc.flag+` "`+tc.value+`" disagrees with the group, whose meta item records "`+tc.recorded+`"`)
		}
	}

	text := c.MustRun("status", "--group", group, "--lease-table", leases)
	require.Contains(t, text, "group: 30 of ~30 done (100.0%), 0 left, ETA done\n")
}

// TestStatusOfAGroupThatDoesNotExist: a misspelt group (no 'work' of it has started) is bad
// usage, exit 2 naming it, in text and --json (with or without --table), as pause, resume and
// scale treat it: a script polling for "finished" stops instead of waiting for ever.
func TestStatusOfAGroupThatDoesNotExist(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 5)
	c.WorkOnce(table, leases, 1)
	for _, extra := range [][]string{nil, {"--json"}, {"--json", "--table", table}, {"--json", "--table", "no-such-table"}} {
		args := append([]string{"status", "--group", table + "/defualt", "--lease-table", leases}, extra...)
		stdout, stderr, code := c.Run(args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, `group "`+table+`/defualt" does not exist in "`+leases+`"`)
		require.Empty(t, stdout)
	}
	c.MustRun("status", "--group", table+"/default", "--lease-table", leases)
}
