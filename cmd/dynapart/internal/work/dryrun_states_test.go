package work_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// reviewCase is a job of the review of 33b0099 (TestWorkDryRunEstimateWithStates): a source table of reviewItems items (key "id",
// a string), items made by item, a state set up before the run by setup (through the job's own
// ledger), and the CLI flags besides --ledger with the worker Config they stand for.
type reviewCase struct {
	name   string
	ledger string
	args   []string
	cfg    func(*worker.Config)
	item   func(i int) map[string]types.AttributeValue
	setup  func(t *testing.T, ctx context.Context, l worker.Ledger, i int, key worker.Key)
	bound  bool          // the dry run's figures are approximate (--transaction-batches): checked as upper bounds
	items  int           // reviewItems when 0
	delay  time.Duration // each handler's run
}

const reviewItems = 20

func reviewKey(i int) worker.Key {
	return worker.Key{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%08d", i)}}
}

func reviewEstimateAndRun(t *testing.T, c reviewCase) (est, got costFigures, calls map[string]int, completed int64, out string) {
	ctx := context.Background()
	cl := clitest.New(t)
	db := ddbtest.Client(t)
	table, leases, ledgerTable := ddbtest.TableName(t, ""), ddbtest.TableName(t, "lease"), ddbtest.TableName(t, "ledger")
	for _, n := range []string{table, leases, ledgerTable} {
		ddbtest.DeleteOnCleanup(t, db, n)
	}
	cl.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases, "--ledger-table", ledgerTable)
	l := jobLedger(t, db, c.ledger, table, ledgerTable)
	n := c.items
	if n == 0 {
		n = reviewItems
	}
	for i := range n {
		item := c.item(i)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		require.NoError(t, err)
		if c.setup != nil {
			key := worker.Key{"id": item["id"]}
			c.setup(t, ctx, l, i, key)
		}
	}

	est, out = dryRunFigures(t, cl.MustRun(append([]string{"work", "--table", table, "--lease-table", leases, "--ledger-table", ledgerTable,
		"--workers", "1", "--dry-run", "--ledger", c.ledger}, c.args...)...))

	m := newBillMeter(db, map[string][]string{table: {"id"}, ledgerTable: {"pk"}})
	cfg := worker.Config{
		Client: m, Table: table, LeaseTable: leases, LedgerTable: ledgerTable, Ledger: worker.LedgerKind(c.ledger),
		Workers: 1, Once: true, PageSize: 1000, Mode: scan.ModeSegment,
	}
	if c.cfg != nil {
		c.cfg(&cfg)
	}
	w, err := worker.New(cfg)
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	require.NoError(t, w.Run(rctx, func(context.Context, worker.Item) error { time.Sleep(c.delay); return nil }))
	return est, costFigures{wcu: m.wcu, rcu: m.rcu, gsi: m.gsiWCU}, m.calls, w.Stats().Completed, out
}

func plainItem(payload int) func(int) map[string]types.AttributeValue {
	return func(i int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": reviewKey(i)["id"], "payload": &types.AttributeValueMemberS{Value: strings.Repeat("x", payload)}}
	}
}

// numbersItem has n number attributes of one significant digit (DynamoDB: 2 bytes each, 1 byte
// per two significant digits plus 1; capacity.ItemSize: len/2+1 = 1 byte).
func numbersItem(n int) func(int) map[string]types.AttributeValue {
	return func(i int) map[string]types.AttributeValue {
		item := map[string]types.AttributeValue{"id": reviewKey(i)["id"]}
		for j := range n {
			item[fmt.Sprintf("n%03d", j)] = &types.AttributeValueMemberN{Value: "7"}
		}
		return item
	}
}

// failFirst records a failure with a long error text for the first n items: dead-lettered, or
// a retry due at once.
func failFirst(n int, permanent bool, errLen int) func(*testing.T, context.Context, worker.Ledger, int, worker.Key) {
	return failFirstAt(n, permanent, errLen, -time.Hour)
}

func failFirstAt(n int, permanent bool, errLen int, due time.Duration) func(*testing.T, context.Context, worker.Ledger, int, worker.Key) {
	return func(t *testing.T, ctx context.Context, l worker.Ledger, i int, key worker.Key) {
		if i >= n {
			return
		}
		now := time.Now()
		req := worker.ClaimRequest{Key: key, Owner: "setup", Slot: 0, Token: 1, Now: now, Until: now.Add(time.Minute)}
		res, err := l.FailOnly(ctx, req, ledger.Failure{Error: strings.Repeat("e", errLen), Permanent: permanent, MaxAttempts: 5, RetryAt: now.Add(due)})
		require.NoError(t, err)
		require.True(t, res.Applied)
	}
}

func doneEven() func(*testing.T, context.Context, worker.Ledger, int, worker.Key) {
	return func(t *testing.T, ctx context.Context, l worker.Ledger, i int, key worker.Key) {
		if i%2 == 0 {
			doneFirst(i+1)(t, ctx, l, i, key)
		}
	}
}

func doneFirst(n int) func(*testing.T, context.Context, worker.Ledger, int, worker.Key) {
	return func(t *testing.T, ctx context.Context, l worker.Ledger, i int, key worker.Key) {
		if i >= n {
			return
		}
		now := time.Now()
		req := worker.ClaimRequest{Key: key, Owner: "setup", Slot: 0, Token: 1, Now: now, Until: now.Add(time.Minute)}
		res, err := l.CompleteOnly(ctx, req)
		require.NoError(t, err)
		require.True(t, res.Applied)
	}
}

// TestWorkDryRunEstimateWithStates (from a review of 33b0099): the dry run's estimate against what a
// --once run bills (billMeter: DynamoDB's billing rules) for items near 1 KB by the ledger's
// numbers, items of many numbers, table ledger rows holding an error text or a long key. Before
// the fixes the first two failed (numbers sized len/2+1, not by significant digits: estimated 40
// WCU where 60 and 80 were billed), and the table ledger's three (its rows sized from the key
// alone, a refused claim billed 1 WCU whatever the row: 30 for 40, 40 for 60, 70 for 90). With
// --transaction-batches the dry run's figures are approximate; in these two jobs they hold as
// upper bounds, which the test checks.
func TestWorkDryRunEstimateWithStates(t *testing.T) {
	batchTx := func(c *worker.Config) { c.BatchClaims, c.TransactionBatches = true, true }
	longID := func(i int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%08d-%s", i, strings.Repeat("k", 1000))},
			"payload": &types.AttributeValueMemberS{Value: "x"}}
	}
	// The inline ledger's claimed and done item at exactly 1024 bytes by capacity.ItemSize: its
	// numbers (claim_until, done_at: 13 digits, 7 bytes for ItemSize, 8 for DynamoDB; attempts
	// and token "1": 1 byte, DynamoDB 2) take it past 1 KB.
	boundary := 0
	{
		fps, err := worker.NewFootprints(worker.Config{Client: ddbtest.Client(t), Table: "sizing", LeaseTable: "sizing-leases", Workers: 1}, []string{"id"})
		require.NoError(t, err)
		for p := 700; p < 1024; p++ {
			_, fp, err := fps.Of(context.Background(), plainItem(p)(0))
			require.NoError(t, err)
			// 2 bytes short of 1 KB: the run's times may have a digit more than the dry run's.
			if max(fp.Claimed, fp.Done) > 1022 {
				break
			}
			boundary = p
		}
		_, fp, _ := fps.Of(context.Background(), plainItem(boundary)(0))
		t.Logf("payload %d: footprint %+v", boundary, fp)
	}
	for _, c := range []reviewCase{
		{name: "inline-state-numbers-at-1KB", ledger: "inline", item: plainItem(boundary)},
		// capacity.ItemSize sizes a number as len/2+1: "7" is 1 byte, DynamoDB bills 2.
		{name: "inline-number-attributes", ledger: "inline", item: numbersItem(150)},
		// The table ledger's rows of items that failed before: the refused claim of a failed row
		// with its error text is billed by that row (2 WCU), not 1.
		{name: "table-failed-long-error", ledger: "table", item: plainItem(10), setup: failFirst(10, true, 1000)},
		// A retry due at once: the table ledger's row holds the error; its claim and completion
		// are billed by that row, the estimate sizes a row of its key alone.
		{name: "table-retry-long-error", ledger: "table", item: plainItem(10), setup: failFirst(10, false, 1000)},
		// Control: the inline ledger's retry carries the error on the scanned item.
		{name: "control/inline-retry-long-error", ledger: "inline", item: plainItem(10), setup: failFirst(10, false, 1000)},
		// Long item keys: the table ledger's row holds the key twice (pk and key map), > 2 KB; a
		// done row's refused claim is billed by it.
		{name: "table-long-key-half-done", ledger: "table", item: longID, setup: doneFirst(10)},
		// --transaction-batches, the table ledger, half done: a transaction with a refused claim
		// is cancelled (billed), and the rest are sent again; batches of one are single writes.
		{name: "table-transaction-batches-half-done", ledger: "table", args: []string{"--batch-claims", "--transaction-batches"},
			cfg: batchTx, item: plainItem(10), setup: doneFirst(10), bound: true},
		{name: "table-transaction-batches-interleaved-done", ledger: "table", args: []string{"--batch-claims", "--transaction-batches", "--concurrency", "100"},
			cfg: func(c *worker.Config) { batchTx(c); c.Concurrency = 100 }, item: plainItem(10), setup: doneEven(), bound: true, items: 100, delay: 300 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			est, got, calls, completed, out := reviewEstimateAndRun(t, c)
			t.Logf("estimate %.0f WCU, %.1f RCU besides the scans; run %.0f WCU (+%.0f index), %.1f RCU; completed %d; requests %v\n%s",
				est.wcu, est.rcu, got.wcu, got.gsi, got.rcu, completed, calls, out)
			if c.bound {
				require.GreaterOrEqual(t, est.wcu, got.wcu+got.gsi, "WCU: the dry run's figure is at least the run's here")
				require.GreaterOrEqual(t, est.rcu, got.rcu, "RCU: the dry run's figure is at least the run's here")
				return
			}
			require.Equal(t, got.wcu+got.gsi, est.wcu, "WCU: the run's (expected) against the dry run's estimate (actual)")
			require.Equal(t, got.rcu, est.rcu, "RCU besides the scans: the run's (expected) against the dry run's estimate (actual)")
		})
	}
}
