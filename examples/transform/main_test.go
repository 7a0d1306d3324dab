package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// childSpec is what a worker child of TestKilledMigrationExactlyOnce runs.
type childSpec struct {
	Endpoint string                 `json:"endpoint"`
	Job      Job                    `json:"job"`
	Owner    string                 `json:"owner"`
	Crash    exampleutil.CrashPoint `json:"crash"`
}

func TestMain(m *testing.M) {
	// The killed migration's workers are this test binary started again as children.
	exampleutil.RunIfChild(runChild)
	ddbtest.Main(m)
}

// runChild runs one migration worker with short leases, stopped at its crash point (the n-th
// UpdateItem of the people table: a completion with the item's change merged in).
func runChild(ctx context.Context, spec childSpec) error {
	cc, err := exampleutil.NewCrashClient(ctx, spec.Endpoint, spec.Crash, func(w exampleutil.Write) bool {
		return w.Op == "UpdateItem" && w.Touches(spec.Job.Table, attrID, "")
	})
	if err != nil {
		return err
	}
	cfg := exampleutil.QuickTakeover(Config(cc, spec.Job))
	cfg.Owner = spec.Owner
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	return w.Run(ctx, worker.WithEffects(Handler))
}

// newJob creates a people table of n items and a lease table.
func newJob(t *testing.T, db *dynamodb.Client, n, workers int) Job {
	t.Helper()
	j := Job{Table: ddbtest.TableName(t, "people"), Leases: ddbtest.TableName(t, "lease"), Workers: workers}
	require.NoError(t, CreatePeople(context.Background(), db, j.Table, n))
	ddbtest.DeleteOnCleanup(t, db, j.Table)
	require.NoError(t, lock.CreateTable(context.Background(), db, j.Leases))
	ddbtest.DeleteOnCleanup(t, db, j.Leases)
	return j
}

// jobEnv is a job on a new table of n people with workers slots, a client, and a context that
// ends with the test (at most a minute).
func jobEnv(t *testing.T, n, workers int) (context.Context, *dynamodb.Client, Job) {
	t.Helper()
	db := ddbtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, db, newJob(t, db, n, workers)
}

// requireMigrated checks every item of the people table: at version 2 exactly (migrated once),
// first and last split from its demo name, no name left, and done by the ledger.
func requireMigrated(t *testing.T, db *dynamodb.Client, table string, n int) {
	t.Helper()
	ctx := context.Background()
	pages := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	seen := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		require.NoError(t, err)
		for _, it := range page.Items {
			seen++
			id := it[attrID].(*types.AttributeValueMemberS).Value
			i, err := strconv.Atoi(strings.TrimPrefix(id, "p-"))
			require.NoError(t, err)
			want := Split(demoNames[i%len(demoNames)])
			require.Equal(t, "2", it[attrVersion].(*types.AttributeValueMemberN).Value, "%s migrated exactly once", id)
			require.Equal(t, want.First, it[attrFirst].(*types.AttributeValueMemberS).Value, id)
			if want.Last == "" {
				require.NotContains(t, it, attrLast, id)
			} else {
				require.Equal(t, want.Last, it[attrLast].(*types.AttributeValueMemberS).Value, id)
			}
			require.NotContains(t, it, attrName, id)
		}
	}
	require.Equal(t, n, seen)
	l, err := ledger.NewInline(db, table, []string{attrID})
	require.NoError(t, err)
	sum, err := l.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(n), sum.Done)
}

// writeCounter counts the writes that reached DynamoDB per operation, for one table.
type writeCounter struct {
	mu  sync.Mutex
	ops map[string]int
}

func countWrites(db *dynamodb.Client, table string) (*ddbfault.Client, *writeCounter) {
	fc, wc := ddbfault.New(db), &writeCounter{ops: map[string]int{}}
	fc.OnSent(func(s ddbfault.Sent) {
		var name *string
		switch in := s.In.(type) {
		case *dynamodb.UpdateItemInput:
			name = in.TableName
		case *dynamodb.PutItemInput:
			name = in.TableName
		case *dynamodb.TransactWriteItemsInput:
			name = aws.String(table) // every transaction counts
		}
		if aws.ToString(name) == table {
			wc.mu.Lock()
			wc.ops[s.Op]++
			wc.mu.Unlock()
		}
	})
	return fc, wc
}

func (w *writeCounter) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.ops {
		out[k] = v
	}
	return out
}

// TestDryRunMigrateRerun: the dry run writes nothing and reports what would change; the migration
// sends exactly one UpdateItem per item (the completion with the change merged in) and no
// transaction; the same command again does nothing, and a run under a new group reads the table
// and skips every item (no write).
func TestDryRunMigrateRerun(t *testing.T) {
	const n = 300
	ctx, db, j := jobEnv(t, n, 2)
	fc, writes := countWrites(db, j.Table)

	var out bytes.Buffer
	dry, err := DryRun(ctx, db, j.Table, &out, 3)
	require.NoError(t, err)
	require.Equal(t, DryRunCounts{Items: n, WouldChange: n * 9 / 10, Unchanged: n / 10}, dry)
	require.Equal(t, 3, strings.Count(out.String(), "\n"), out.String())
	t.Logf("dry run: %+v\n%s", dry, out.String())

	done, err := Migrate(ctx, fc, j)
	require.NoError(t, err)
	require.Equal(t, Outcome{Completed: n}, done)
	require.Equal(t, map[string]int{"UpdateItem": n}, writes.snapshot(), "one write per item, no transaction")
	requireMigrated(t, db, j.Table, n)

	done, err = Migrate(ctx, fc, j)
	require.NoError(t, err)
	require.Zero(t, done, "a rerun of the finished job does nothing")
	again := j
	again.Group = j.Table + "/again"
	done, err = Migrate(ctx, fc, again)
	require.NoError(t, err)
	require.Zero(t, done, "a new group skips every item done")
	require.Equal(t, map[string]int{"UpdateItem": n}, writes.snapshot(), "no write after the migration")
	dry, err = DryRun(ctx, db, j.Table, &out, 3)
	require.NoError(t, err)
	require.Equal(t, DryRunCounts{Items: n, Done: n}, dry)
	requireMigrated(t, db, j.Table, n)
}

// TestMigrateReportsFailedItems: an item the migration cannot change (its schema_version is a
// string, which an Add refuses) is dead-lettered and counted as failed, and the program's run
// ends with an error naming the way out; it used to report the completed items alone and exit 0.
func TestMigrateReportsFailedItems(t *testing.T) {
	const n = 20
	ctx, db, j := jobEnv(t, n, 1)
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(j.Table), Item: map[string]types.AttributeValue{
		attrID: &types.AttributeValueMemberS{Value: "p-bad"}, attrName: &types.AttributeValueMemberS{Value: "Ada Lovelace"},
		attrVersion: &types.AttributeValueMemberS{Value: "1"}}})
	require.NoError(t, err)
	err = run(ctx, db, j, false)
	require.ErrorContains(t, err, "1 items could not be migrated and are dead-lettered")
	l, err := ledger.NewInline(db, j.Table, []string{attrID})
	require.NoError(t, err)
	sum, err := l.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, ledger.Summary{Total: n + 1, Done: n, Failed: 1}, sum)
}

// TestKilledMigrationExactlyOnce SIGKILLs two migration workers (child processes) in the middle of
// an item: one after its write landed (its answer lost), one before its write is sent; two fresh
// workers finish the job. Every item is migrated exactly once (version 2, not 1 or 3).
func TestKilledMigrationExactlyOnce(t *testing.T) {
	const n = 400
	db := ddbtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	j := newJob(t, db, n, 2)
	endpoint := ddbtest.Endpoint(t)
	spec := func(i int, crash exampleutil.CrashPoint) any {
		return childSpec{Endpoint: endpoint, Job: j, Owner: fmt.Sprintf("migrator-%d", i), Crash: crash}
	}
	said, err := exampleutil.KillAtCrashPoints(ctx, []exampleutil.CrashPoint{
		{N: 20, At: exampleutil.AfterLanded}, {N: 30, At: exampleutil.BeforeSend},
	}, spec)
	require.NoError(t, err)
	t.Logf("killed: %q", said)
	require.NoError(t, exampleutil.RunToEnd(ctx, 2, func(i int) any { return spec(2+i, exampleutil.CrashPoint{}) }))
	requireMigrated(t, db, j.Table, n)
}

// TestCLIOneLiner runs the README's commands: the dry run, `dynapart work --exec "transform step"
// --exec-effects --complete-only`, `dynapart verify`, and the work command again.
func TestCLIOneLiner(t *testing.T) {
	const n = 60
	db := ddbtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	j := newJob(t, db, n, 2)
	bin := t.TempDir()
	for _, pkg := range []string{"cmd/dynapart", "examples/transform"} {
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/dynapart/dynapart/"+pkg)
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build %s: %s", pkg, out)
	}
	dynapart := func(args ...string) string {
		args = append(args, "--endpoint", ddbtest.Endpoint(t))
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "dynapart"), args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "dynapart %s: %s %s", strings.Join(args, " "), stdout.String(), stderr.String())
		return stdout.String()
	}
	work := []string{"work", "--table", j.Table, "--lease-table", j.Leases, "--workers", "2", "--once"}
	t.Logf("dry run:\n%s", dynapart(append(work, "--complete-only", "--dry-run")...))
	l, err := ledger.NewInline(db, j.Table, []string{attrID})
	require.NoError(t, err)
	sum, err := l.Summarize(ctx)
	require.NoError(t, err)
	require.Zero(t, sum.Done, "the dry run writes nothing")

	step := filepath.Join(bin, "transform") + " step"
	dynapart(append(work, "--complete-only", "--exec", step, "--exec-effects")...)
	requireMigrated(t, db, j.Table, n)
	var verify ledger.Summary
	require.NoError(t, json.Unmarshal([]byte(dynapart("verify", "--table", j.Table, "--json")), &verify))
	require.Equal(t, ledger.Summary{Total: n, Done: n}, verify)
	dynapart(append(work, "--complete-only", "--exec", step, "--exec-effects")...)
	requireMigrated(t, db, j.Table, n)
}

// TestUnversionedItem: an item with a name but no schema_version (version 1 written without one)
// ends at version 2, from the Go handler and from `transform step`; adding 1 to nothing gave 1.
func TestUnversionedItem(t *testing.T) {
	ctx, db, j := jobEnv(t, 0, 1)
	key := map[string]types.AttributeValue{attrID: &types.AttributeValueMemberS{Value: "p-unversioned"}}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(j.Table), Item: map[string]types.AttributeValue{
		attrID: key[attrID], attrName: &types.AttributeValueMemberS{Value: "Ada Lovelace"}}})
	require.NoError(t, err)
	done, err := Migrate(ctx, db, j)
	require.NoError(t, err)
	require.Equal(t, Outcome{Completed: 1}, done)
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(j.Table), Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Equal(t, &types.AttributeValueMemberN{Value: "2"}, got.Item[attrVersion])
	require.Equal(t, &types.AttributeValueMemberS{Value: "Lovelace"}, got.Item[attrLast])

	var out bytes.Buffer
	require.NoError(t, Step(strings.NewReader(`{"id": "p-1", "name": "Ada Lovelace"}`), &out))
	require.JSONEq(t, `{"set": {"first": "Ada", "last": "Lovelace", "schema_version": 2}, "remove": ["name"]}`, out.String())
	out.Reset()
	require.NoError(t, Step(strings.NewReader(`{"id": "p-1", "name": "Ada Lovelace", "schema_version": 1}`), &out))
	require.JSONEq(t, `{"set": {"first": "Ada", "last": "Lovelace"}, "add": {"schema_version": 1}, "remove": ["name"]}`, out.String())
}
