package root_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

func tableNames(t *testing.T, db *dynamodb.Client) []string {
	var names []string
	var start *string
	for {
		out, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{ExclusiveStartTableName: start})
		require.NoError(t, err)
		names = append(names, out.TableNames...)
		if out.LastEvaluatedTableName == nil {
			return names
		}
		start = out.LastEvaluatedTableName
	}
}

func TestBadUsageExits2AndWritesNothing(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	before := tableNames(t, db)
	tbl := ddbtest.TableName(t, "never")
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"work", "--workers", "2"}, "--table"},
		{[]string{"work", "--table", tbl, "--workers", "-1"}, "--workers"},
		{[]string{"work", "--table", tbl}, "--workers"}, // joins a group that does not exist
		{[]string{"work", "--table", tbl, "--workers", "2", "--mode", "sideways"}, "--mode"},
		{[]string{"work", "--table", tbl, "--workers", "2", "--no-steal"}, "--no-steal"}, // continuous workers never steal
		{[]string{"work", "--table", tbl, "--workers", "2", "--ledger", "paper"}, "--ledger"},
		{[]string{"init", "--table", tbl, "--endpoint", "not a url"}, "--endpoint"},
		{[]string{"init", "--table", tbl, "--endpoint", "ftp://x"}, "--endpoint"},
		{[]string{"init", "--table", tbl, "--key", "id:X"}, "--key"},
		{[]string{"seed", "--table", tbl, "--items", "-1"}, "--items"},
		{[]string{"partition", "--workers", "0", "a"}, "--workers"},
		{[]string{"partition", "--workers", "2", "--type", "B", "!!notbase64"}, "base64"},
		{[]string{"verify"}, "--table"},
		{[]string{"work", "--table", tbl, "--workers", "2", "--no-such-flag"}, "no-such-flag"},
		{[]string{"frobnicate"}, "frobnicate"},
		{[]string{"work", "--table", tbl, "--workers", "2", "--once"}, tbl}, // missing table
		// Names DynamoDB refuses, before anything is sent.
		{[]string{"work", "--table", "bad name!", "--workers", "2", "--once"}, `--table "bad name!": not a DynamoDB table name`},
		{[]string{"verify", "--table", tbl, "--ledger", "table", "--ledger-table", "ab"}, `--ledger-table "ab"`},
		{[]string{"pause", "--lease-table", strings.Repeat("x", 256), "--group", "g"}, "--lease-table"},
		// A group given without --group: an argument these commands do not take (it exited 1).
		{[]string{"resume", "users/default"}, `unknown command "users/default"`},
		{[]string{"pause", "users/default"}, `unknown command "users/default"`},
		{[]string{"scale", "users/default", "--workers", "2"}, `unknown command "users/default"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := c.Run(tc.args...)
			require.Equal(t, 2, code, "stderr: %s", stderr)
			require.Contains(t, stderr, tc.says)
			require.NotContains(t, stderr, "dynapart: dynapart:")
		})
	}
	t.Run("env", func(t *testing.T) {
		_, stderr, code := c.RunEnv(map[string]string{"DYNAPART_WORKERS": "many"}, "work", "--table", tbl)
		require.Equal(t, 2, code)
		require.Contains(t, stderr, "DYNAPART_WORKERS")
	})
	// Other packages' tests share this DynamoDB Local and make their own tables meanwhile, so look
	// only at the tables these commands could have made: the named one and the default ones.
	mine := func(names []string) []string {
		var out []string
		for _, n := range names {
			if n == tbl || n == "dynapart-leases" || n == "dynapart-ledger" {
				out = append(out, n)
			}
		}
		return out
	}
	require.ElementsMatch(t, mine(before), mine(tableNames(t, db)), "bad usage must create no table")
}

// TestEndToEnd: init, seed, three `work --once --exec` processes for two slots, verify.
func TestEndToEnd(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 300)
	c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases) // idempotent

	_, _, code := c.Run("verify", "--table", table)
	require.Equal(t, 1, code, "nothing is done yet")

	log := filepath.Join(c.Dir, "handled.log")
	script := fmt.Sprintf(`printf '%%s %%s\n' "$DYNAPART_SLOT" "$(cat | head -c 200 | tr -d '\n' | cut -c1-30)" >> %s`, log)
	// Handlers run once per item only while no lease is lost, so the lease is long enough that a
	// loaded machine's slow heartbeats do not lose one (a takeover is tested elsewhere).
	var workers []func() (string, string, int)
	for i := range 3 {
		workers = append(workers, c.Start(nil, "work", "--table", table, "--lease-table", leases, "--workers", "2", "--once",
			"--exec", script, "--lease-ttl", "15s", "--owner", fmt.Sprintf("w%d", i), "--progress", "none"))
	}
	for i, wait := range workers {
		_, stderr, code := wait()
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("worker %d stderr:\n%s", i, stderr)
			}
		})
		require.Equal(t, 0, code, "worker %d stderr:\n%s", i, stderr)
	}
	out := c.MustRun("verify", "--table", table, "--json")
	var s map[string]int
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Equal(t, map[string]int{"total": 300, "done": 300, "pending": 0, "claimed": 0, "failed": 0}, s)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Equal(t, 300, strings.Count(string(b), "\n"), "one handler run per item")

	out = c.MustRun("status", "--group", table+"/default", "--lease-table", leases, "--json")
	var st status.Document
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, 2, st.Workers)
	require.True(t, st.Finished)
}
