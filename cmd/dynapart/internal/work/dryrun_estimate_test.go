package work_test

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// billMeter is a worker client that bills, by DynamoDB's rules, the requests a run sends to the
// source and ledger tables: a write 1 WCU per KB started of the larger of the item before and
// after it (also when its condition fails), twice in a transaction; a read 1 RCU per 4 KB started
// of the whole item (a projection does not lower it; a missing item costs the minimum), half when
// eventually consistent, BatchGetItem per item. Writes are serialized so that the sizes before
// and after are the write's own. Scans are left out (the dry run reports them as DynamoDB did).
type billMeter struct {
	db   *dynamodb.Client
	keys map[string][]string // metered table -> its key attributes
	gsi  map[string]string   // metered table -> the shard attribute of its pending index (ALL projected)

	mu       sync.Mutex
	wcu, rcu float64
	gsiWCU   float64 // the pending index's writes (DynamoDB Local does not report them)
	calls    map[string]int
}

func newBillMeter(db *dynamodb.Client, keys map[string][]string) *billMeter {
	return &billMeter{db: db, keys: keys, calls: map[string]int{}}
}

func (m *billMeter) size(ctx context.Context, table string, key map[string]types.AttributeValue) int {
	n, _ := m.sizeIndexed(ctx, table, key)
	return n
}

// sizeIndexed is the item's size, and whether it is in the table's pending index.
func (m *billMeter) sizeIndexed(ctx context.Context, table string, key map[string]types.AttributeValue) (int, bool) {
	out, err := m.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		return 0, false
	}
	_, indexed := out.Item[m.gsi[table]]
	return ddbItemSize(out.Item), indexed && m.gsi[table] != ""
}

func units(size, unit int) float64 { return math.Max(1, math.Ceil(float64(size)/float64(unit))) }

func (m *billMeter) read(ctx context.Context, call, table string, key map[string]types.AttributeValue, consistent bool) {
	if _, ok := m.keys[table]; !ok {
		return
	}
	u := units(m.size(ctx, table, key), 4096)
	if !consistent {
		u /= 2
	}
	m.mu.Lock()
	m.rcu += u
	m.calls[call+" "+table]++
	m.mu.Unlock()
}

// write bills one item written by call (held under m.mu by the caller); old is its size before.
// A write that changes an item of the pending index (ALL projected) also writes the index: its
// entry updated, put or deleted, 1 WCU per KB of the entry.
func (m *billMeter) write(ctx context.Context, call, table string, key map[string]types.AttributeValue, old int, factor float64) {
	m.writeIndexed(ctx, call, table, key, old, false, false, factor)
}

func (m *billMeter) writeIndexed(ctx context.Context, call, table string, key map[string]types.AttributeValue, old int, oldIn, landed bool, factor float64) {
	n, newIn := m.sizeIndexed(ctx, table, key)
	m.wcu += factor * units(max(old, n), 1024)
	m.calls[call+" "+table]++
	switch {
	case !landed:
	case oldIn && newIn:
		m.gsiWCU += units(max(old, n), 1024)
	case oldIn:
		m.gsiWCU += units(old, 1024)
	case newIn:
		m.gsiWCU += units(n, 1024)
	}
}

func billedWrite(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return err == nil || errors.As(err, &ccf)
}

func (m *billMeter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := m.db.GetItem(ctx, in, o...)
	if err == nil {
		m.read(ctx, "GetItem", aws.ToString(in.TableName), in.Key, aws.ToBool(in.ConsistentRead))
	}
	return out, err
}

func (m *billMeter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := m.db.BatchGetItem(ctx, in, o...)
	if err == nil {
		for table, ka := range in.RequestItems {
			left := len(out.UnprocessedKeys[table].Keys)
			for _, k := range ka.Keys[:len(ka.Keys)-left] {
				m.read(ctx, "BatchGetItem", table, k, aws.ToBool(ka.ConsistentRead))
			}
		}
	}
	return out, err
}

func (m *billMeter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	table := aws.ToString(in.TableName)
	ka, ok := m.keys[table]
	if !ok {
		return m.db.PutItem(ctx, in, o...)
	}
	key := map[string]types.AttributeValue{}
	for _, k := range ka {
		key[k] = in.Item[k]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.size(ctx, table, key)
	out, err := m.db.PutItem(ctx, in, o...)
	if billedWrite(err) {
		m.write(ctx, "PutItem", table, key, old, 1)
	}
	return out, err
}

func (m *billMeter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	table := aws.ToString(in.TableName)
	if _, ok := m.keys[table]; !ok {
		return m.db.UpdateItem(ctx, in, o...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, oldIn := m.sizeIndexed(ctx, table, in.Key)
	out, err := m.db.UpdateItem(ctx, in, o...)
	if billedWrite(err) {
		m.writeIndexed(ctx, "UpdateItem", table, in.Key, old, oldIn, err == nil, 1)
	}
	return out, err
}

func (m *billMeter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	type target struct {
		table string
		key   map[string]types.AttributeValue
		old   int
	}
	var ts []target
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range in.TransactItems {
		var t target
		switch {
		case it.Update != nil:
			t = target{table: aws.ToString(it.Update.TableName), key: it.Update.Key}
		case it.ConditionCheck != nil:
			t = target{table: aws.ToString(it.ConditionCheck.TableName), key: it.ConditionCheck.Key}
		case it.Delete != nil:
			t = target{table: aws.ToString(it.Delete.TableName), key: it.Delete.Key}
		case it.Put != nil:
			t = target{table: aws.ToString(it.Put.TableName), key: map[string]types.AttributeValue{}}
			for _, k := range m.keys[t.table] {
				t.key[k] = it.Put.Item[k]
			}
		}
		if _, ok := m.keys[t.table]; ok {
			t.old = m.size(ctx, t.table, t.key)
			ts = append(ts, t)
		}
	}
	out, err := m.db.TransactWriteItems(ctx, in, o...)
	var tc *types.TransactionCanceledException
	if err == nil || errors.As(err, &tc) {
		for _, t := range ts {
			m.write(ctx, "TransactWriteItems", t.table, t.key, t.old, 2)
		}
	}
	return out, err
}

var (
	stmtTable = regexp.MustCompile(`^(?:UPDATE|INSERT INTO) "([^"]+)"`)
	stmtWhere = regexp.MustCompile(`"([^"]+)" = \?`)
)

// statementKey is the table and key an UPDATE or INSERT statement of the ledger writes.
func (m *billMeter) statementKey(s types.BatchStatementRequest) (string, map[string]types.AttributeValue) {
	text := aws.ToString(s.Statement)
	table := stmtTable.FindStringSubmatch(text)[1]
	ka := m.keys[table]
	key := map[string]types.AttributeValue{}
	if strings.HasPrefix(text, "INSERT") {
		for i, k := range ka {
			key[k] = s.Parameters[i]
		}
		return table, key
	}
	where := strings.Index(text, " WHERE ")
	n := strings.Count(text[:where], "?")
	for j, mm := range stmtWhere.FindAllStringSubmatch(text[where:], len(ka)) {
		key[mm[1]] = s.Parameters[n+j]
	}
	return table, key
}

func (m *billMeter) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tables := make([]string, len(in.Statements))
	keys := make([]map[string]types.AttributeValue, len(in.Statements))
	olds := make([]int, len(in.Statements))
	for i, s := range in.Statements {
		tables[i], keys[i] = m.statementKey(s)
		olds[i] = m.size(ctx, tables[i], keys[i])
	}
	out, err := m.db.BatchExecuteStatement(ctx, in, o...)
	if err == nil {
		for i, r := range out.Responses {
			if r.Error == nil || r.Error.Code == types.BatchStatementErrorCodeEnumConditionalCheckFailed ||
				r.Error.Code == types.BatchStatementErrorCodeEnumDuplicateItem {
				m.write(ctx, "BatchExecuteStatement", tables[i], keys[i], olds[i], 1)
			}
		}
	}
	return out, err
}

func (m *billMeter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return m.db.Query(ctx, in, o...)
}

func (m *billMeter) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return m.db.Scan(ctx, in, o...)
}

func (m *billMeter) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return m.db.DescribeTable(ctx, in, o...)
}

// ddbItemSize is an item's size by DynamoDB's rules.
func ddbItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + ddbValueSize(v)
	}
	return n
}

func ddbValueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return numberSize(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + ddbValueSize(e)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + ddbValueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range x.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range x.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range x.Value {
			n += len(b)
		}
		return n
	}
	return 1
}

// numberSize is DynamoDB's size of a number as measured on DynamoDB Local, written apart from
// capacity.NumberSize: the digits in pairs aligned on the decimal point, 1 byte per pair from the
// first pair that is not 00 to the last, plus 1, plus 1 for a minus sign; 21 at most.
func numberSize(s string) int {
	neg := strings.HasPrefix(s, "-")
	intPart, frac := plainDecimal(strings.TrimLeft(s, "+-"))
	if len(intPart)%2 != 0 {
		intPart = "0" + intPart
	}
	if len(frac)%2 != 0 {
		frac += "0"
	}
	digits := intPart + frac
	var pairs []string
	for i := 0; i < len(digits); i += 2 {
		pairs = append(pairs, digits[i:i+2])
	}
	for len(pairs) > 0 && pairs[0] == "00" {
		pairs = pairs[1:]
	}
	for len(pairs) > 0 && pairs[len(pairs)-1] == "00" {
		pairs = pairs[:len(pairs)-1]
	}
	if len(pairs) == 0 {
		return 1
	}
	size := len(pairs) + 1
	if neg {
		size++
	}
	return min(size, 21)
}

// plainDecimal writes an unsigned number without its exponent (1.5E+3: "1500", ""), moving the
// point in the text, so no digit is lost.
func plainDecimal(s string) (intPart, frac string) {
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, _ = strconv.Atoi(s[i+1:])
		s = s[:i]
	}
	intPart, frac, _ = strings.Cut(s, ".")
	digits, point := intPart+frac, len(intPart)+exp
	switch {
	case point <= 0:
		return "0", strings.Repeat("0", -point) + digits
	case point >= len(digits):
		return digits + strings.Repeat("0", point-len(digits)), ""
	}
	return digits[:point], digits[point:]
}

// costCase is one job whose dry-run estimate is compared with what a run consumes.
type costCase struct {
	name         string
	ledger       string // inline, table
	completeOnly bool
	batch, tx    bool
	versions     bool
	payload      int  // bytes of each item's payload attribute
	index        bool // --mode index (the pending index made by init --index)
	finished     int  // items done (10%) or failed before the run, out of costItems
}

const costItems = 20

func (c costCase) args() []string {
	a := []string{"--ledger", c.ledger}
	if c.completeOnly {
		a = append(a, "--complete-only")
	}
	if c.batch {
		a = append(a, "--batch-claims")
	}
	if c.tx {
		a = append(a, "--transaction-batches")
	}
	if c.versions {
		a = append(a, "--versions")
	}
	if c.index {
		a = append(a, "--mode", "index")
	}
	return a
}

type costFigures struct{ wcu, rcu, gsi, scan float64 } // writes of the ledger; reads besides the scans; index writes; the scans' reads

// estimateAndRun runs the dry run of c's job, then the job itself (--once, through a billMeter),
// and returns both figures.
func estimateAndRun(t *testing.T, c costCase) (est, got costFigures, calls map[string]int, stats worker.Stats) {
	ctx := context.Background()
	cli := clitest.New(t)
	db := ddbtest.Client(t)
	table, leases, ledgerTable := ddbtest.TableName(t, ""), ddbtest.TableName(t, "lease"), ddbtest.TableName(t, "ledger")
	for _, n := range []string{table, leases, ledgerTable} {
		ddbtest.DeleteOnCleanup(t, db, n)
	}
	initArgs := []string{"init", "--table", table, "--key", "id:S", "--lease-table", leases, "--ledger-table", ledgerTable}
	if c.index {
		initArgs = append(initArgs, "--index")
	}
	cli.MustRun(initArgs...)
	payload := strings.Repeat("x", c.payload)
	for i := range costItems {
		item := map[string]types.AttributeValue{"id": seedKey(i)["id"], "payload": &types.AttributeValueMemberS{Value: payload}}
		if c.index {
			scan.MarkPending(item, "id", "dp_shard", 16)
		}
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		require.NoError(t, err)
	}
	if c.finished > 0 {
		l := jobLedger(t, db, c.ledger, table, ledgerTable)
		now := time.Now()
		for i := range c.finished {
			req := worker.ClaimRequest{Key: seedKey(i), Owner: "setup", Slot: 0, Token: 1, Now: now, Until: now.Add(time.Minute)}
			res, err := l.CompleteOnly(ctx, req)
			require.NoError(t, err)
			require.True(t, res.Applied)
		}
	}

	est, _ = dryRunFigures(t, cli.MustRun(append([]string{"work", "--table", table, "--lease-table", leases, "--ledger-table", ledgerTable,
		"--workers", "1", "--dry-run"}, c.args()...)...))

	m := newBillMeter(db, map[string][]string{table: {"id"}, ledgerTable: {"pk"}})
	if c.index {
		m.gsi = map[string]string{table: "dp_shard"}
	}
	mode := scan.ModeSegment
	if c.index {
		mode = scan.ModeIndex
	}
	w, err := worker.New(worker.Config{
		Client: m, Table: table, LeaseTable: leases, LedgerTable: ledgerTable, Ledger: worker.LedgerKind(c.ledger),
		Workers: 1, Once: true, CompleteOnly: c.completeOnly, BatchClaims: c.batch, TransactionBatches: c.tx, Versions: c.versions,
		PageSize: 1000, Mode: mode,
	})
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	require.NoError(t, w.Run(rctx, func(context.Context, worker.Item) error { return nil }))
	st := w.Stats()
	require.Equal(t, int64(costItems-c.finished), st.Completed, "every pending item completed")
	return est, costFigures{wcu: m.wcu, rcu: m.rcu, gsi: m.gsiWCU}, m.calls, st
}

// jobLedger is the default job's ledger of kind ("inline" or "table") over table, keyed by "id".
func jobLedger(t *testing.T, db *dynamodb.Client, kind, table, ledgerTable string) worker.Ledger {
	t.Helper()
	var l worker.Ledger
	var err error
	if kind == "table" {
		l, err = worker.NewTableLedger(db, ledgerTable, "default", table, []string{"id"})
	} else {
		l, err = worker.NewInlineLedger(db, table, []string{"id"}, worker.InlineOptions{})
	}
	require.NoError(t, err)
	return l
}

// dryRunFigures reads a dry run's estimate from its output: its WCU, the RCU its total adds to the
// scans, and the scans' RCU.
func dryRunFigures(t *testing.T, out string) (costFigures, string) {
	t.Helper()
	total := regexp.MustCompile(`estimated cost of the job: (\d+) WCU and ([\d.]+) RCU in all`).FindStringSubmatch(out)
	require.NotNil(t, total, out)
	scanned := regexp.MustCompile(`(?m)^all\s+\d+\s+\d+\s+\d+\s+\d+\s+([\d.]+)\s`).FindStringSubmatch(out)
	require.NotNil(t, scanned, out)
	var est costFigures
	est.wcu, _ = strconv.ParseFloat(total[1], 64)
	all, _ := strconv.ParseFloat(total[2], 64)
	est.scan, _ = strconv.ParseFloat(scanned[1], 64)
	est.rcu = all - est.scan
	return est, out
}

// TestWorkDryRunEstimateMatchesRun compares work --dry-run's estimate (its WCU, and the RCU its
// total adds to the scans) with what a --once run of the same job sends, billed by DynamoDB's
// rules (billMeter), for 20 items (found by a review of 588897c: every case but the controls
// failed before the estimate sized the ledger's writes as they are written):
//   - inline ledger, items near a KB boundary: the claim and completion write the item with the
//     ledger's state attributes (~130-170 bytes), which the estimate's size left out;
//   - table ledger in claim mode: every scanned item is claimed (its state is not on the item), and
//     the refused claim of a done or failed item is billed 1 WCU; the estimate counted pending items;
//   - table ledger with --transaction-batches: claims are never fresh there, so each claim made in
//     a transaction of more than one is read back (1 RCU per row); how many items a transaction
//     takes depends on timing, so the estimate is an upper bound there, checked as one;
//   - --mode index with the table ledger: each completed item leaves the pending index with an
//     UpdateItem of the source item; and every write of an item in the index writes the index
//     (billMeter models those writes: DynamoDB Local does not bill indexes).
func TestWorkDryRunEstimateMatchesRun(t *testing.T) {
	for _, v := range []struct {
		costCase
		checkWCU, checkRCU bool
		bound              bool // the estimate is an upper bound of the run's figures, not equal to them
	}{
		{costCase: costCase{name: "control/inline-small", ledger: "inline", payload: 100}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "inline-batch-versions-5000", ledger: "inline", batch: true, versions: true, payload: 5000}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "control/table-versions-5000", ledger: "table", versions: true, payload: 5000}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "control/table-complete-only-versions-half-done", ledger: "table", completeOnly: true, versions: true, payload: 100, finished: 10}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "inline-900", ledger: "inline", payload: 900}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "inline-3000", ledger: "inline", payload: 3000}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "inline-complete-only-3000", ledger: "inline", completeOnly: true, payload: 3000}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "inline-complete-only-versions-1000", ledger: "inline", completeOnly: true, versions: true, payload: 1000}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "inline-batch-versions-4000", ledger: "inline", batch: true, versions: true, payload: 4000}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "inline-half-done", ledger: "inline", payload: 100, finished: 10}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "table-half-done", ledger: "table", payload: 100, finished: 10}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "table-transaction-batches", ledger: "table", batch: true, tx: true, payload: 100}, checkWCU: true, checkRCU: true, bound: true},
		{costCase: costCase{name: "inline-index-3000", ledger: "inline", index: true, payload: 3000}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "inline-complete-only-index-3000", ledger: "inline", completeOnly: true, index: true, payload: 3000}, checkWCU: true, checkRCU: true},
		{costCase: costCase{name: "table-index-3000", ledger: "table", index: true, payload: 3000}, checkWCU: true, checkRCU: true},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			est, got, calls, st := estimateAndRun(t, v.costCase)
			t.Logf("estimate %.0f WCU, %.1f RCU besides the scans; run %.0f WCU (+%.0f of the pending index), %.1f RCU (Stats: %.1f WCU, %.1f RCU with the scans); requests %v",
				est.wcu, est.rcu, got.wcu, got.gsi, got.rcu, st.WCU, st.RCU, calls)
			check := func(want, estimate float64, what string) {
				t.Helper()
				if v.bound {
					require.GreaterOrEqual(t, estimate, want, "%s: the dry run's estimate is at least the run's", what)
					return
				}
				require.Equal(t, want, estimate, "%s: the run's (expected) against the dry run's estimate (actual)", what)
			}
			if v.checkWCU {
				check(got.wcu+got.gsi, est.wcu, "WCU (the pending index's writes included)")
			}
			if v.checkRCU {
				check(got.rcu, est.rcu, "RCU besides the scans")
			}
			// The run's own figure, which --max-rcu holds the group to, counts the same reads (its
			// scan read what the dry run's did): the ledger's row reads were left out of it.
			require.InDelta(t, est.scan+got.rcu, st.RCU, 0.01, "Stats.RCU: the scans and every read besides them")
		})
	}
}

// The oracle's number sizes are the ones measured on DynamoDB Local (as capacity's
// TestItemSizeByDynamoDBRules holds them): digits pair on the decimal point, a sign costs a byte.
func TestBillMeterNumberSize(t *testing.T) {
	for s, want := range map[string]int{"7": 2, "0": 1, "12": 2, "123": 3, "1795907093412": 8,
		"1795907093400": 7, "1795907093410": 8, "-0.00120": 3, "1.5E+3": 2, "100000": 2, "110": 3, "1.5": 3, "0.012": 3,
		"-5": 3, "1234567890120": 8, "100": 2, "1000": 2, "12.5": 3, "19.99": 3, "0.5": 2,
		"1.2345678901234567890123456789012345678E+5": 20, "1.5E-3": 2} {
		require.Equal(t, want, numberSize(s), s)
	}
}
