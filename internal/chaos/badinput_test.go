package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

func quietConfig(c worker.Config) worker.Config {
	c.Logger = slog.New(slog.DiscardHandler)
	c.Once = true
	c.LeaseTTL, c.PollInterval, c.RetryBackoff = 2*time.Second, 100*time.Millisecond, 10*time.Millisecond
	return c
}

// TestBadInputConfigs: every invalid configuration is a *worker.ConfigError naming the field,
// from New, before any I/O.
func TestBadInputConfigs(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	base := worker.Config{Client: db, Table: "t", Workers: 2}
	cases := map[string]func(*worker.Config){
		"no client":              func(c *worker.Config) { c.Client = nil },
		"no table":               func(c *worker.Config) { c.Table = "" },
		"fewer segments than N":  func(c *worker.Config) { c.Workers, c.Segments = 8, 4 },
		"negative workers":       func(c *worker.Config) { c.Workers = -3 },
		"unknown mode":           func(c *worker.Config) { c.Mode = scan.Mode("sideways") },
		"unknown ledger":         func(c *worker.Config) { c.Ledger = worker.LedgerKind("paper") },
		"fewer shards than N":    func(c *worker.Config) { c.Mode, c.Shards, c.Workers = scan.ModeIndex, 2, 4 },
		"negative concurrency":   func(c *worker.Config) { c.Concurrency = -1 },
		"negative max attempts":  func(c *worker.Config) { c.MaxAttempts = -1 },
		"negative lease ttl":     func(c *worker.Config) { c.LeaseTTL = -time.Second },
		"heartbeat >= lease ttl": func(c *worker.Config) { c.LeaseTTL, c.Heartbeat = time.Second, 2*time.Second },
		"negative claim ttl":     func(c *worker.Config) { c.ClaimTTL = -time.Second },
		"negative page size":     func(c *worker.Config) { c.PageSize = -5 },
		"negative read rate":     func(c *worker.Config) { c.ReadRate = -1 },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			c := base
			mod(&c)
			_, err := worker.New(c)
			var ce *worker.ConfigError
			require.ErrorAs(t, err, &ce, "New must refuse %s with a *ConfigError", name)
			require.NotEmpty(t, ce.Field)
			t.Logf("%s: %v", name, err)
		})
	}
}

// TestBadInputMalformedCheckpoints: a slot whose checkpoint is garbage (or a valid header with a
// garbage scan cursor) is rescanned from the start; every item is done, once.
func TestBadInputMalformedCheckpoints(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	ctx := context.Background()
	for _, cp := range []string{"garbage", "dp1|x|0|", "dp1|0|0|{not json", `dp1|3|1|{"v":1,"t":"other","n":9,"c":[]}`, "dp9|0|0|", strings.Repeat("|", 1000)} {
		t.Run(fmt.Sprintf("%.20q", cp), func(t *testing.T) {
			table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
			leases := leaseTable(t, db)
			seedItems(t, db, table, 200, nil)
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(leases), Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "group#" + table + "/default"}, "sk": &types.AttributeValueMemberN{Value: "0"},
				"owner": &types.AttributeValueMemberS{Value: "ghost"}, "token": &types.AttributeValueMemberN{Value: "4"},
				"version": &types.AttributeValueMemberN{Value: "1"}, "expires_at": &types.AttributeValueMemberN{Value: "1"},
				"released": &types.AttributeValueMemberBOOL{Value: true}, "checkpoint": &types.AttributeValueMemberS{Value: cp}}})
			require.NoError(t, err)
			w, err := worker.New(quietConfig(worker.Config{Client: db, Table: table, LeaseTable: leases, Workers: 1}))
			require.NoError(t, err)
			rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			require.NoError(t, w.Run(rctx, func(context.Context, worker.Item) error { return nil }))
			led, err := worker.NewInlineLedger(db, table, []string{"id"}, worker.InlineOptions{})
			require.NoError(t, err)
			sum, err := led.Summarize(ctx)
			require.NoError(t, err)
			require.Equal(t, worker.Summary{Total: 200, Done: 200}, sum)
			// Every item done once by the ledger; by the worker's count too, unless the machine
			// was loaded enough for the 2 s lease to be lost by load: completions cut off at its
			// end whose settling read did not answer in time are counted as neither done nor
			// failed (and skipped as done later), never twice.
			st := w.Stats()
			if st.LeasesLost == 0 {
				require.EqualValues(t, 200, st.Completed, "stats: %+v", st)
			} else {
				require.LessOrEqual(t, st.Completed, int64(200), "stats: %+v", st)
				t.Logf("%d leases lost by load; the worker counted %d of the 200 completions (stats: %+v)", st.LeasesLost, st.Completed, st)
			}
		})
	}
}

// TestBadInputPartitionAttrTypes: in filter mode, items whose partition attribute is missing or of
// an unexpected type (BOOL, L, M, NULL, a set) still belong to exactly one slot (missing: slot 0):
// every item is done once by two workers.
func TestBadInputPartitionAttrTypes(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	ctx := context.Background()
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	leases := leaseTable(t, db)
	odd := []types.AttributeValue{nil, &types.AttributeValueMemberS{Value: "x"}, &types.AttributeValueMemberN{Value: "-7.5e3"},
		&types.AttributeValueMemberB{Value: []byte{0, 1}}, &types.AttributeValueMemberBOOL{Value: true}, &types.AttributeValueMemberNULL{Value: true},
		&types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "1"}}},
		&types.AttributeValueMemberSS{Value: []string{"a", "b"}}, &types.AttributeValueMemberS{Value: ""}}
	seedItems(t, db, table, 300, func(i int, it map[string]types.AttributeValue) {
		if v := odd[i%len(odd)]; v != nil {
			it["grp"] = v
		}
	})
	done := map[string]int{}
	var mu = make(chan struct{}, 1)
	errs := make(chan error, 2)
	var lost atomic.Int64
	for i := range 2 {
		w, err := worker.New(quietConfig(worker.Config{Client: db, Table: table, LeaseTable: leases, Workers: 2, Mode: scan.ModeFilter,
			PartitionAttr: "grp", Owner: fmt.Sprintf("p%d", i), Hooks: worker.Hooks{OnItem: func(e worker.ItemEvent) {
				if e.Outcome == worker.OutcomeCompleted {
					mu <- struct{}{}
					done[keyString(e.Key)]++
					<-mu
				}
			}}}))
		require.NoError(t, err)
		go func() {
			err := w.Run(ctx, func(context.Context, worker.Item) error { return nil })
			lost.Add(w.Stats().LeasesLost)
			errs <- err
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	// Every item done by the ledger, none completed twice; every completion counted too, unless
	// the machine was loaded enough for a 2 s lease to be lost (see TestBadInputMalformedCheckpoints:
	// a completion cut off at the lease's end may be counted as neither done nor failed).
	led, err := worker.NewInlineLedger(db, table, []string{"id"}, worker.InlineOptions{})
	require.NoError(t, err)
	sum, err := led.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, worker.Summary{Total: 300, Done: 300}, sum)
	for k, n := range done {
		require.Equal(t, 1, n, k)
	}
	if lost.Load() == 0 {
		require.Len(t, done, 300)
	} else {
		t.Logf("%d leases lost by load; %d of the 300 completions counted", lost.Load(), len(done))
	}
}

// TestBadInputOversizeItem: an item so close to DynamoDB's 400 KB limit that the inline ledger's
// attributes do not fit must not stop the others or hang the job; it is left untouched (no
// half-written state) and the worker ends within a bounded time.
func TestBadInputOversizeItem(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	ctx := context.Background()
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	leases := leaseTable(t, db)
	seedItems(t, db, table, 100, nil)
	big := strings.Repeat("z", 400*1024-64)
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "big"}, "b": &types.AttributeValueMemberS{Value: big}}})
	require.NoError(t, err)
	w, err := worker.New(quietConfig(worker.Config{Client: db, Table: table, LeaseTable: leases, Workers: 1, MaxAttempts: 2}))
	require.NoError(t, err)
	const limit = 45 * time.Second
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	runErr := w.Run(rctx, func(context.Context, worker.Item) error { return nil })
	took := time.Since(start)
	t.Logf("Run returned after %s: %v (stats %+v)", took.Round(time.Millisecond), runErr, w.Stats())
	// A once job ends: done, or an error that names the item. Rescanning until the deadline is a hang.
	require.Less(t, took, limit-5*time.Second, "a once job must end, not rescan forever, on an item it cannot claim")
	require.False(t, errors.Is(runErr, context.DeadlineExceeded), "a once job must end before its deadline: %v", runErr)
	led, err := worker.NewInlineLedger(db, table, []string{"id"}, worker.InlineOptions{})
	require.NoError(t, err)
	for i := range 100 {
		st, err := led.State(ctx, worker.Key{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%05d", i)}})
		require.NoError(t, err)
		require.Equal(t, worker.StatusDone, st.Status, "item-%05d", i)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "big"}}})
	require.NoError(t, err)
	require.Equal(t, big, out.Item["b"].(*types.AttributeValueMemberS).Value, "the oversize item's content is intact")
}

// TestBadInputTableSchemas: a ledger or lease table with another key schema is refused with a
// typed error before anything is written; the CLI exits 2.
func TestBadInputTableSchemas(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	ctx := context.Background()
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seedItems(t, db, table, 10, nil)
	wrong := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "other", Type: "N"})
	leases := leaseTable(t, db)

	w, err := worker.New(quietConfig(worker.Config{Client: db, Table: table, LeaseTable: leases, Workers: 1, Ledger: worker.LedgerTable, LedgerTable: wrong}))
	require.NoError(t, err)
	err = w.Run(ctx, func(context.Context, worker.Item) error { return nil })
	require.ErrorIs(t, err, worker.ErrLedgerTableSchema)

	w, err = worker.New(quietConfig(worker.Config{Client: db, Table: table, LeaseTable: wrong, Workers: 1}))
	require.NoError(t, err)
	err = w.Run(ctx, func(context.Context, worker.Item) error { return nil })
	var te *lock.TableError
	require.ErrorAs(t, err, &te)

	for _, args := range [][]string{{"--lease-table", wrong}, {"--lease-table", leases, "--ledger", "table", "--ledger-table", wrong}} {
		cmd := exec.Command(binary, append([]string{"work", "--endpoint", ddbtest.Endpoint(t), "--table", table, "--workers", "1", "--once", "--progress", "none"}, args...)...)
		cmd.Env = cliEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 2, ee.ExitCode(), "%v: %s", args, stderr.String())
		require.Contains(t, stderr.String(), wrong)
	}
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(wrong)})
	require.NoError(t, err)
	require.Zero(t, out.Count, "nothing written to the wrong table")
	out, err = db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), FilterExpression: aws.String("attribute_exists(dp_status)")})
	require.NoError(t, err)
	require.Zero(t, out.Count, "no item state written")
}

// TestBadInputWrongCredentials: DynamoDB refusing the credentials (UnrecognizedClientException)
// ends `dynapart work` promptly with exit 1 and a message that names the problem, without the
// secret key.
func TestBadInputWrongCredentials(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusBadRequest, "UnrecognizedClientException", "The security token included in the request is invalid.")
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	cmd := exec.Command(binary, "work", "--endpoint", srv.URL, "--table", "users", "--workers", "1", "--once", "--progress", "none")
	cmd.Env = append(cliEnv(), "AWS_ACCESS_KEY_ID="+accessKeyID, "AWS_SECRET_ACCESS_KEY="+secretAccess, "AWS_REGION=us-east-1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "want a failure, got %v", err)
		require.Equal(t, 1, ee.ExitCode(), stderr.String())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("dynapart work kept running for 60s with refused credentials: %s", stderr.String())
	}
	t.Logf("refused credentials: exit after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	require.Contains(t, stderr.String(), "UnrecognizedClientException")
	require.NotContains(t, stderr.String(), secretAccess)
}
