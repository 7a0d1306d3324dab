package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/clock"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// fixture is a source table with n items, a lease table and a ledger table.
type fixture struct {
	db          *dynamodb.Client
	table       string
	leaseTable  string
	ledgerTable string
}

func newFixture(t testing.TB, n int) *fixture {
	t.Helper()
	db := ddbtest.Client(t)
	f := &fixture{db: db, table: ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})}
	ctx := context.Background()
	f.leaseTable = ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(ctx, db, f.leaseTable))
	ddbtest.DeleteOnCleanup(t, db, f.leaseTable)
	f.ledgerTable = ddbtest.TableName(t, "ledger")
	require.NoError(t, CreateLedgerTable(ctx, db, f.ledgerTable))
	ddbtest.DeleteOnCleanup(t, db, f.ledgerTable)
	f.seed(t, 0, n, nil)
	return f
}

func itemKey(i int) string { return fmt.Sprintf("item-%06d", i) }

// seed writes items lo..lo+n-1; extra may add attributes to item i.
func (f *fixture) seed(t testing.TB, lo, n int, extra func(i int, item map[string]types.AttributeValue)) {
	t.Helper()
	ctx := context.Background()
	for start := lo; start < lo+n; start += 25 {
		var reqs []types.WriteRequest
		for i := start; i < min(start+25, lo+n); i++ {
			item := map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: itemKey(i)},
				"n":  &types.AttributeValueMemberN{Value: strconv.Itoa(i)},
			}
			if extra != nil {
				extra(i, item)
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		for len(reqs) > 0 {
			out, err := f.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{f.table: reqs}})
			require.NoError(t, err)
			reqs = out.UnprocessedItems[f.table]
		}
	}
}

func (f *fixture) config(kind LedgerKind) Config {
	return Config{
		Client: f.db, Table: f.table, LeaseTable: f.leaseTable, LedgerTable: f.ledgerTable, Ledger: kind,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (f *fixture) ledger(t testing.TB, kind LedgerKind, job string, opts ...ledger.Option) Ledger {
	t.Helper()
	if job == "" {
		job = "default"
	}
	var l Ledger
	var err error
	if kind == LedgerTable {
		l, err = ledger.NewTable(f.db, f.ledgerTable, job, f.table, []string{"id"}, append([]ledger.Option{ledger.WithCompleteOnlyAudit()}, opts...)...)
	} else {
		// As NewInlineLedger with no InlineOptions, and opts.
		l, err = ledger.NewInline(f.db, f.table, []string{"id"}, append([]ledger.Option{ledger.WithPrefix(""), ledger.WithRemoveOnDone(),
			ledger.WithCompleteOnlyAudit()}, opts...)...)
	}
	require.NoError(t, err)
	return l
}

func skey(id string) Key { return Key{"id": &types.AttributeValueMemberS{Value: id}} }

func keyID(k Key) string { return k["id"].(*types.AttributeValueMemberS).Value }

// completions records which worker completed which item, from the OnItem hook.
type completions struct {
	mu    sync.Mutex
	by    map[string][]string
	total atomic.Int64
}

func newCompletions() *completions { return &completions{by: map[string][]string{}} }

func (c *completions) hook(owner string) func(ItemEvent) {
	return func(e ItemEvent) {
		if e.Outcome != OutcomeCompleted {
			return
		}
		c.mu.Lock()
		c.by[keyID(e.Key)] = append(c.by[keyID(e.Key)], owner)
		c.mu.Unlock()
		c.total.Add(1)
	}
}

// crashable is a worker's client that, once dead is set, fails every call but DescribeTable at
// once, like a dead process whose writes never arrive. It remembers the items it sent a write for.
type crashable struct {
	DynamoDBClient
	dead atomic.Bool

	mu      sync.Mutex
	touched map[string]bool // item ids this client has sent a write for
}

var errCrashed = errors.New("test: worker crashed")

func newCrashable(db ddbfault.Next) *crashable {
	fc := ddbfault.New(db)
	c := &crashable{DynamoDBClient: workerClient(fc)}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if c.dead.Load() {
			return nil, errCrashed
		}
		switch in := call.In.(type) {
		case *dynamodb.UpdateItemInput:
			c.touch(in.Key)
		case *dynamodb.TransactWriteItemsInput:
			for _, it := range in.TransactItems {
				if it.Update != nil {
					c.touch(it.Update.Key)
				}
			}
		case *dynamodb.BatchExecuteStatementInput:
			for _, st := range in.Statements {
				c.touch(statementItemKeys(st)...)
			}
		}
		return send(ctx, call.In)
	}, ddbfault.OpGetItem, ddbfault.OpPutItem, ddbfault.OpUpdateItem, ddbfault.OpQuery, ddbfault.OpScan, ddbfault.OpTransactWriteItems, ddbfault.OpBatchExecuteStatement)
	return c
}

func (c *crashable) touch(keys ...map[string]types.AttributeValue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.touched == nil {
		c.touched = map[string]bool{}
	}
	for _, k := range keys {
		if v, ok := k["id"].(*types.AttributeValueMemberS); ok {
			c.touched[v.Value] = true
		}
		if v, ok := k["pk"].(*types.AttributeValueMemberS); ok { // table ledger rows end in the item id
			c.touched[v.Value[max(0, len(v.Value)-len("item-000000")):]] = true
		}
	}
}

// wrote reports whether this client ever sent a write for the item.
func (c *crashable) wrote(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.touched[id]
}

// workerClient is fc as a worker's client with only the calls DynamoDBClient names: without
// BatchGetItem the ledger reads claims back with GetItem, as through the test wrappers these
// tests were written with.
func workerClient(fc *ddbfault.Client) DynamoDBClient { return struct{ DynamoDBClient }{fc} }

func newTestClock() *clock.Fake { return clock.NewFake(time.Now()) }

// testGroupMeta is the meta a new group of c records (its default segment count).
func testGroupMeta(c Config) map[string]string {
	return groupMeta(c, scan.DefaultTotal(c.Workers, c.SubSegments))
}

// handlerCalls counts handler calls per item and remembers the attempts the handler was told.
type handlerCalls struct {
	mu       sync.Mutex
	calls    map[string]int
	attempts map[string][]int
}

func newHandlerCalls() *handlerCalls {
	return &handlerCalls{calls: map[string]int{}, attempts: map[string][]int{}}
}

func (h *handlerCalls) record(it Item) {
	id := it.Key["id"].(*types.AttributeValueMemberS).Value
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[id]++
	h.attempts[id] = append(h.attempts[id], it.Attempt)
}

// isClaimStatement reports a PartiQL statement of a claim (it sets the claim's expiry).
func isClaimStatement(st types.BatchStatementRequest) bool {
	return strings.Contains(aws.ToString(st.Statement), `claim_until" = ?`)
}

// statementItemKeys are the fixture item keys among a statement's parameters (the fixtures' ids
// start with "item-"), as {"id": id}.
func statementItemKeys(st types.BatchStatementRequest) []map[string]types.AttributeValue {
	var keys []map[string]types.AttributeValue
	for _, p := range st.Parameters {
		if v, ok := p.(*types.AttributeValueMemberS); ok && strings.HasPrefix(v.Value, "item-") {
			keys = append(keys, map[string]types.AttributeValue{"id": v})
		}
	}
	return keys
}
