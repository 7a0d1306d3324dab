package work_test

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// TestWorkDryRun: a dry run counts each slot's pending items (skipping done and failed ones, on
// both ledgers), matches the partition function in filter mode, and writes nothing: the source,
// lease and ledger tables are the same before and after, and no lease item exists.
func TestWorkDryRun(t *testing.T) {
	for _, ledger := range []string{"inline", "table"} {
		t.Run(ledger, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := clitest.New(t)
			db := ddbtest.Client(t)
			table := ddbtest.TableName(t, "")
			leases := ddbtest.TableName(t, "lease")
			ledgerTable := ddbtest.TableName(t, "ledger")
			for _, n := range []string{table, leases, ledgerTable} {
				ddbtest.DeleteOnCleanup(t, db, n)
			}
			c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases, "--ledger-table", ledgerTable)
			c.MustRun("seed", "--table", table, "--items", "120")
			// Items 0..19 done, 20..24 failed.
			l := jobLedger(t, db, ledger, table, ledgerTable)
			now := time.Now()
			for i := range 25 {
				req := worker.ClaimRequest{Key: seedKey(i), Owner: "setup", Slot: 0, Token: 1, Now: now, Until: now.Add(time.Minute)}
				if i < 20 {
					res, err := l.CompleteOnly(ctx, req)
					require.NoError(t, err)
					require.True(t, res.Applied)
					continue
				}
				outs, err := l.Claim(ctx, []worker.ClaimRequest{req})
				require.NoError(t, err)
				require.NoError(t, l.DeadLetter(ctx, outs[0].Claim, "boom", now))
			}
			before := map[string][]string{table: scanAll(t, db, table), leases: scanAll(t, db, leases), ledgerTable: scanAll(t, db, ledgerTable)}
			require.Empty(t, before[leases])

			out := c.MustRun("work", "--table", table, "--lease-table", leases, "--ledger", ledger, "--ledger-table", ledgerTable,
				"--workers", "3", "--mode", "filter", "--dry-run")
			rows := regexp.MustCompile(`(?m)^(\d|all)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)`).FindAllStringSubmatch(out, -1)
			require.Len(t, rows, 4, out)
			want := [3]int{}
			for i := range 120 {
				want[scan.Partition(seedKey(i)["id"], 3)]++
			}
			for s := range 3 {
				read, _ := strconv.Atoi(rows[s][3])
				require.Equal(t, want[s], read, "slot %d reads its partition: %s", s, out)
			}
			all := rows[3]
			require.Equal(t, []string{"95", "120", "20", "5"}, all[2:6], "to process, read, done, failed: %s", out)
			wcu, _ := strconv.Atoi(all[7])
			wantWCU := 190 // a claim and a completion per pending item, 1 WCU each
			if ledger == "table" {
				wantWCU += 25 // and a refused claim of each done or failed item, whose state the scan does not see
			}
			require.Equal(t, wantWCU, wcu, out)
			require.Regexp(t, `\{"id":"item-\d{8}"\}`, out, "sample keys")

			for name, b := range before {
				require.Equal(t, b, scanAll(t, db, name), "table %s unchanged", name)
			}
		})
	}
}

func TestWorkDryRunBadUsage(t *testing.T) {
	c := clitest.New(t)
	tbl := ddbtest.TableName(t, "never")
	for _, args := range [][]string{
		{"work", "--table", tbl, "--workers", "2", "--dry-run"},
		{"work", "--table", tbl, "--workers", "0", "--dry-run"},
		{"work", "--table", tbl, "--workers", "2", "--mode", "x", "--dry-run"},
	} {
		_, stderr, code := c.Run(args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
}

func seedKey(i int) worker.Key {
	return worker.Key{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%08d", i)}}
}

// scanAll returns every item of a table, as sorted strings.
func scanAll(t *testing.T, db *dynamodb.Client, table string) []string {
	t.Helper()
	var out []string
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, it := range page.Items {
			out = append(out, fmt.Sprintf("%v", cli.PlainMap(it)))
		}
	}
	sort.Strings(out)
	return out
}

// TestWorkDryRunCountsItemReads: the estimate counts what a run reads besides its scan: with
// --versions, each pending item read again after its claim unless the inline ledger's single
// claim returns it, and with the table ledger in complete-only mode each item's row (1 RCU each
// for items and rows this small). The scan's RCU column is unchanged.
func TestWorkDryRunCountsItemReads(t *testing.T) {
	for _, v := range []struct {
		name  string
		args  []string
		reads int // RCU of reads besides the scan, for 40 pending items
	}{
		{"inline", []string{"--ledger", "inline", "--versions"}, 0},
		{"inline-complete-only", []string{"--ledger", "inline", "--versions", "--complete-only"}, 0},
		{"inline-batch", []string{"--ledger", "inline", "--versions", "--batch-claims"}, 40},
		{"table", []string{"--ledger", "table", "--versions"}, 40},
		{"table-unversioned-complete-only", []string{"--ledger", "table", "--complete-only"}, 40},
		{"table-complete-only", []string{"--ledger", "table", "--versions", "--complete-only"}, 80},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			c := clitest.New(t)
			db := ddbtest.Client(t)
			table, leases, ledgerTable := ddbtest.TableName(t, ""), ddbtest.TableName(t, "lease"), ddbtest.TableName(t, "ledger")
			for _, n := range []string{table, leases, ledgerTable} {
				ddbtest.DeleteOnCleanup(t, db, n)
			}
			c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases, "--ledger-table", ledgerTable)
			c.MustRun("seed", "--table", table, "--items", "40")
			args := append([]string{"work", "--table", table, "--lease-table", leases, "--ledger-table", ledgerTable,
				"--workers", "2", "--dry-run"}, v.args...)
			out := c.MustRun(args...)
			total := regexp.MustCompile(`estimated cost of the job: (\d+) WCU and ([\d.]+) RCU in all`).FindStringSubmatch(out)
			require.NotNil(t, total, out)
			scanned := regexp.MustCompile(`(?m)^all\s+\d+\s+\d+\s+\d+\s+\d+\s+([\d.]+)\s`).FindStringSubmatch(out)
			require.NotNil(t, scanned, out)
			all, _ := strconv.ParseFloat(total[2], 64)
			scanRCU, _ := strconv.ParseFloat(scanned[1], 64)
			require.InDelta(t, float64(v.reads), all-scanRCU, 0.05, out)
			if v.reads > 0 {
				require.Contains(t, out, fmt.Sprintf("and %d RCU of ", v.reads), out)
			} else {
				require.NotContains(t, out, "read again", out)
			}
		})
	}
}
