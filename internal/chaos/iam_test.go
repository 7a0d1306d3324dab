package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// recorder is a DynamoDB client that notes every operation and the resource it touches
// ("table/<name>" or "table/<name>/index/<index>"). It has every method a *dynamodb.Client offers
// the worker, BatchGetItem included, so the worker takes the same paths as in production.
type recorder struct {
	*ddbfault.Client
	mu   sync.Mutex
	seen map[string]bool // "dynamodb:Action resource"
}

func newRecorder(db *dynamodb.Client) *recorder {
	r := &recorder{Client: ddbfault.New(db), seen: map[string]bool{}}
	r.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		var index *string
		switch in := call.In.(type) {
		case *dynamodb.QueryInput:
			index = in.IndexName
		case *dynamodb.ScanInput:
			index = in.IndexName
		}
		if in, ok := call.In.(*dynamodb.BatchExecuteStatementInput); ok {
			// IAM authorises each statement of a batch by its kind: PartiQLUpdate, PartiQLInsert.
			for i, st := range in.Statements {
				verb, _, _ := strings.Cut(aws.ToString(st.Statement), " ")
				r.note("PartiQL"+strings.ToUpper(verb[:1])+strings.ToLower(verb[1:]), call.Tables[i], nil)
			}
			return send(ctx, call.In)
		}
		for _, table := range call.Tables {
			r.note(call.Op, table, index)
		}
		return send(ctx, call.In)
	}, ddbfault.OpGetItem, ddbfault.OpPutItem, ddbfault.OpUpdateItem, ddbfault.OpQuery, ddbfault.OpScan,
		ddbfault.OpDescribeTable, ddbfault.OpTransactWriteItems, ddbfault.OpBatchGetItem, ddbfault.OpBatchExecuteStatement)
	return r
}

func (r *recorder) note(op, table string, index *string) {
	res := "table/" + table
	if index != nil {
		res += "/index/" + *index
	}
	r.mu.Lock()
	r.seen["dynamodb:"+op+" "+res] = true
	r.mu.Unlock()
}

// policyGrants reads examples/iam/policy.json as "dynamodb:Action table/<name>[/index/<index>]".
func policyGrants(t *testing.T) map[string]bool {
	root, err := ModuleRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "examples", "iam", "policy.json"))
	require.NoError(t, err)
	var pol struct {
		Statement []struct {
			Effect   string
			Action   json.RawMessage
			Resource json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal(b, &pol))
	list := func(raw json.RawMessage) []string {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			return []string{one}
		}
		var many []string
		require.NoError(t, json.Unmarshal(raw, &many))
		return many
	}
	grants := map[string]bool{}
	for _, s := range pol.Statement {
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range list(s.Action) {
			for _, res := range list(s.Resource) {
				_, suffix, ok := strings.Cut(res, ":table/")
				require.True(t, ok, "resource %q is not a table ARN", res)
				grants[a+" table/"+suffix] = true
			}
		}
	}
	return grants
}

// seedItems writes n items item-00000.. to table; mark may add attributes.
func seedItems(t *testing.T, db *dynamodb.Client, table string, n int, mark func(i int, it map[string]types.AttributeValue)) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 25 {
		var reqs []types.WriteRequest
		for i := start; i < min(n, start+25); i++ {
			it := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%05d", i)},
				"payload": &types.AttributeValueMemberS{Value: "x"}}
			if mark != nil {
				mark(i, it)
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		for len(reqs) > 0 {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			require.NoError(t, err)
			reqs = out.UnprocessedItems[table]
		}
	}
}

// TestIAMPolicyCoversEveryCall runs the worker in each mode and ledger (with batch claims,
// complete-only, retries and dead letters) through a recorder and checks that every operation it
// makes is granted by examples/iam/policy.json on the right table: the policy's example names
// "users", "dynapart-leases" and "dynapart-ledger" stand for this test's tables.
func TestIAMPolicyCoversEveryCall(t *testing.T) {
	t.Parallel()
	grants := policyGrants(t)
	db := ddbtest.Client(t)
	ctx := context.Background()
	leases := leaseTable(t, db)
	ledger := ddbtest.TableName(t, "ledger")
	require.NoError(t, worker.CreateLedgerTable(ctx, db, ledger))
	ddbtest.DeleteOnCleanup(t, db, ledger)

	cases := []struct {
		name  string
		cfg   func(*worker.Config)
		fault ddbfault.Kind // injected once, on the first UpdateItem of the source table
	}{
		{"segment+inline", func(c *worker.Config) {}, ""},
		// A claim whose answer is lost is settled by a consistent read of the item.
		{"segment+inline, a claim's answer lost", func(c *worker.Config) {}, ddbfault.LostAnswer},
		{"segment+inline+batch", func(c *worker.Config) { c.BatchClaims = true }, ""},
		{"segment+inline+complete-only", func(c *worker.Config) { c.CompleteOnly = true }, ""},
		{"filter+table", func(c *worker.Config) { c.Mode, c.Ledger = scan.ModeFilter, worker.LedgerTable }, ""},
		{"filter+table+batch", func(c *worker.Config) { c.Mode, c.Ledger, c.BatchClaims = scan.ModeFilter, worker.LedgerTable, true }, ""},
		{"segment+table+complete-only", func(c *worker.Config) { c.Ledger, c.CompleteOnly = worker.LedgerTable, true }, ""},
		{"index+inline+batch", func(c *worker.Config) { c.Mode, c.BatchClaims, c.Shards = scan.ModeIndex, true, 4 }, ""},
		{"index+inline+complete-only", func(c *worker.Config) { c.Mode, c.CompleteOnly, c.Shards = scan.ModeIndex, true, 4 }, ""},
	}
	used := map[string]string{} // "action resource" -> first case
	for _, tc := range cases {
		table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
		c := worker.Config{Table: table, LeaseTable: leases, LedgerTable: ledger, Workers: 2, Once: true,
			LeaseTTL: 2 * time.Second, PollInterval: 100 * time.Millisecond, RetryBackoff: 10 * time.Millisecond,
			MaxRetryBackoff: 20 * time.Millisecond, MaxAttempts: 2, Owner: "iam-" + tc.name,
			Logger: slog.New(slog.DiscardHandler)}
		tc.cfg(&c)
		var mark func(int, map[string]types.AttributeValue)
		if c.Mode == scan.ModeIndex {
			require.NoError(t, scan.CreatePendingIndex(ctx, db, table, "dp_pending", "dp_shard"))
			mark = func(_ int, it map[string]types.AttributeValue) { scan.MarkPending(it, "id", "dp_shard", 4) }
		}
		seedItems(t, db, table, 120, mark)
		rec := newRecorder(db)
		c.Client = rec
		var fc *ddbfault.Client
		if tc.fault != "" {
			fc = ddbfault.New(rec)
			fc.Inject(ddbfault.Fault{Kind: tc.fault, At: 1, Ops: []string{ddbfault.OpUpdateItem}, Table: table})
			c.Client = fc
		}
		// Two workers for two slots; the handler fails some items once and dead-letters others, so
		// retries and dead letters are exercised too (complete-only has no claim to fail).
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		var failedOnce sync.Map
		for i := range 2 {
			c := c
			c.Owner += fmt.Sprint(i)
			w, err := worker.New(c)
			require.NoError(t, err, tc.name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- w.Run(ctx, func(_ context.Context, it worker.Item) error {
					id := it.Key["id"].(*types.AttributeValueMemberS).Value
					switch {
					case c.CompleteOnly:
						return nil
					case strings.HasSuffix(id, "7"):
						return worker.Permanent(fmt.Errorf("permanent"))
					case strings.HasSuffix(id, "3"):
						if _, loaded := failedOnce.LoadOrStore(id, true); !loaded {
							return fmt.Errorf("transient")
						}
					}
					return nil
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, tc.name)
		}
		if fc != nil {
			_, fired := fc.Injected()
			require.True(t, fired, "%s: the fault never fired", tc.name)
		}
		names := map[string]string{"table/" + table: "table/users", "table/" + leases: "table/dynapart-leases",
			"table/" + ledger: "table/dynapart-ledger", "table/" + table + "/index/dp_pending": "table/users/index/dp_pending"}
		for k := range rec.seen {
			action, res, _ := strings.Cut(k, " ")
			mapped, ok := names[res]
			require.True(t, ok, "%s: call on an unexpected resource %s", tc.name, k)
			key := action + " " + mapped
			if _, dup := used[key]; !dup {
				used[key] = tc.name
			}
		}
	}
	var missing []string
	for k, first := range used {
		if !grants[k] {
			missing = append(missing, fmt.Sprintf("%s (first used by %s)", k, first))
		}
	}
	sort.Strings(missing)
	var list []string
	for k := range used {
		list = append(list, k)
	}
	sort.Strings(list)
	t.Logf("operations used: %s", strings.Join(list, ", "))
	require.Empty(t, missing, "operations the worker calls that examples/iam/policy.json does not grant")
	// Least privilege: every grant is used by some case.
	var unused []string
	for k := range grants {
		if _, ok := used[k]; !ok {
			unused = append(unused, k)
		}
	}
	sort.Strings(unused)
	t.Logf("granted but not used by the worker: %v", unused)
}
