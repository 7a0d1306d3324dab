package verify_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestLedgerNoJobUsed: after a job on the table ledger (job j1) that dead-lettered two items,
// verify, failed and redrive asked about the inline ledger, or the table ledger's job "default",
// exit 2 and name the flags the table's group records, where they used to answer "all pending",
// "0 failed items" (exit 0) and "moved 0". Given those flags they answer as before, and on a table
// without groups nothing changes.
func TestLedgerNoJobUsed(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	table, leases := clitest.TableNames(t)
	ledgerTable := ddbtest.TableName(t, "ledger")
	ddbtest.DeleteOnCleanup(t, db, ledgerTable)
	c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases, "--ledger-table", ledgerTable)
	c.MustRun("seed", "--table", table, "--items", "30")
	at := []string{"--table", table, "--lease-table", leases}
	_, stderr, code := c.Run(append([]string{"verify"}, at...)...)
	require.Equal(t, 1, code, "no group yet: not done, as before: %s", stderr)

	used := []string{"--ledger", "table", "--job", "j1", "--ledger-table", ledgerTable}
	c.MustRun(append(append([]string{"work", "--workers", "2", "--once", "--progress", "none", "--exec",
		`case "$DYNAPART_KEY" in *item-00000003*|*item-00000007*) exit 65;; esac; cat >/dev/null`}, at...), used...)...)
	want := "--ledger table --job j1 --ledger-table " + ledgerTable

	for _, args := range [][]string{
		{"verify"}, {"failed"}, {"redrive"},
		{"verify", "--ledger", "table", "--ledger-table", ledgerTable}, // job "default"
		{"failed", "--ledger", "table", "--ledger-table", ledgerTable, "--job", "j2"},
	} {
		stdout, stderr, code := c.Run(append(args, at...)...)
		require.Equal(t, 2, code, "%v: %s%s", args, stdout, stderr)
		require.Contains(t, stderr, "no job of \""+table+"\" used the ledger read", args)
		require.Contains(t, stderr, `group "`+table+`/j1": `+want, args)
	}
	stdout, stderr, code := c.Run(append(append([]string{"failed"}, at...), used...)...)
	require.Equal(t, 0, code, stderr)
	require.Len(t, strings.Split(strings.TrimSpace(stdout), "\n"), 2, stdout)
	stdout, stderr, code = c.Run(append(append([]string{"verify"}, at...), used...)...)
	require.Equal(t, 1, code, stderr)
	require.Equal(t, "total 30  done 28  pending 0  claimed 0  failed 2\n", stdout)
	stdout = c.MustRun(append(append([]string{"redrive"}, at...), used...)...)
	require.Equal(t, "moved 2  not failed 0\n", stdout)
	stdout = c.MustRun(append(append([]string{"redrive"}, at...), used...)...)
	require.Equal(t, "moved 0  not failed 0\n", stdout, "nothing failed in the ledger the group used: exit 0")
}

// TestLedgerNoJobUsedNamesThePrefix: read with --attr-prefix xx_ after a job on the inline ledger's
// default prefix, verify exits 2 naming --attr-prefix dp_ among the flags to give: "--ledger
// inline" alone, given beside the --attr-prefix xx_, answered the same again.
func TestLedgerNoJobUsedNamesThePrefix(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 5)
	at := []string{"--table", table, "--lease-table", leases}
	c.MustRun(append([]string{"work", "--workers", "1", "--once", "--progress", "none"}, at...)...)
	stdout, stderr, code := c.Run(append([]string{"verify", "--attr-prefix", "xx_"}, at...)...)
	require.Equal(t, 2, code, "%s%s", stdout, stderr)
	require.Contains(t, stderr, `group "`+table+`/default": --ledger inline --attr-prefix dp_;`)
	c.MustRun(append([]string{"verify", "--ledger", "inline", "--attr-prefix", "dp_"}, at...)...)
}
