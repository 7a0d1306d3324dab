package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

// quickRun runs the scenarios of opts on the test DynamoDB, within 2 minutes.
func quickRun(t *testing.T, opts Options) (*Env, *Results) {
	t.Helper()
	env := &Env{DB: ddbtest.Client(t), Endpoint: ddbtest.Endpoint(t), ModRoot: "../..", Progress: testWriter{t}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return env, env.Run(ctx, opts)
}

// TestQuickRun runs a tiny version of two scenarios on DynamoDB Local and checks that the report
// has their rows and the plot is drawn: the harness itself is tested in `make test`.
func TestQuickRun(t *testing.T) {
	_, res := quickRun(t, Options{Reps: 2, Items: 200, Quick: true, Only: []string{ScenarioCeiling, ScenarioThroughput}, Concurrencies: []int{4}})
	require.Empty(t, res.Errors)
	require.NotNil(t, res.Ceiling)
	require.Len(t, res.Ceiling.UpdatesPerSec, 2)
	for _, v := range libVariants {
		p := res.Throughput.Point(v, 4)
		require.NotNil(t, p, v)
		require.Len(t, p.ItemsPerSec, 2, v)
		require.Positive(t, p.ItemsPerSec.Min(), v)
	}

	dir := t.TempDir()
	plots, err := res.WritePlots(filepath.Join(dir, "docs", "bench"), dir)
	require.NoError(t, err)
	require.Equal(t, "docs/bench/throughput.png", plots[PlotThroughput])
	st, err := os.Stat(filepath.Join(dir, plots[PlotThroughput]))
	require.NoError(t, err)
	require.Positive(t, st.Size())

	md := res.Markdown(plots)
	for _, want := range []string{
		"## Machine", "## Summary: goals",
		"| Run, complete-only vs plain SDK loop, items/s | >= 0.9x",
		"| Run, claim+complete vs plain SDK loop, items/s |",
		"| Run, batched claims vs plain SDK loop, items/s | >= 1.5x",
		"| DynamoDB Local ceiling |",
		"| conditional UpdateItem, 32 in flight |",
		"## Run versus the plain SDK loop", "![items/s versus concurrency](docs/bench/throughput.png)",
		"## Scale on paper",
		"*Not measured in this run (takeover not selected).*",
	} {
		require.Contains(t, md, want)
	}
}

func TestSampleAndRatio(t *testing.T) {
	s := Sample{3, 1, 2}
	require.Equal(t, 2.0, s.Median())
	require.Equal(t, 1.5, Sample{1, 2}.Median())
	require.Equal(t, "2.00x (1.00–3.00)", s.X())
	require.Equal(t, Sample{2, 0.5}, Ratio(Sample{4, 1}, Sample{2, 2}))
	require.Equal(t, "12,345.7/s", Sample{12345.67}.Fmt(1, "/s"))
	require.Equal(t, "1.008", Sample{1.008, 1.0081}.Counted(3))
	require.Equal(t, "0.404 (0.392–0.410)", Sample{0.392, 0.404, 0.41}.Counted(3))
}

// A ratio against a goal shows a ✗ on a missed median, and more decimals where two would round
// the median across the goal.
func TestGoalX(t *testing.T) {
	require.Equal(t, "0.897x (0.860–0.920) ✗", Sample{0.86, 0.897, 0.92}.GoalX(atLeast(0.9)))
	require.Equal(t, "0.93x (0.90–0.97)", Sample{0.9, 0.93, 0.97}.GoalX(atLeast(0.9)))
	require.Equal(t, "0.41x (0.40–0.48) ✗", Sample{0.4, 0.41, 0.48}.GoalX(atLeast(0.45)))
	require.Equal(t, "0.8996x (0.8600–0.9200) ✗", Sample{0.86, 0.8996, 0.92}.GoalX(atLeast(0.9)))
	require.Equal(t, "1.004x", Sample{1.004}.GoalX(func(x float64) bool { return x > 1 }))
	cell, all := goalCells([]int{1, 4, 16}, func(c int) (Sample, bool) {
		return Sample{map[int]float64{1: 0.95, 4: 0.5}[c]}, c != 16
	}, atLeast(0.9))
	require.Equal(t, "c=1: 0.95x<br>c=4: 0.50x ✗", cell)
	require.False(t, all)
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
BenchmarkPartitionString-2   	 6469220	       181.2 ns/op	       0 B/op	       0 allocs/op
BenchmarkPartitionString-2   	 6469220	       191.2 ns/op	       0 B/op	       0 allocs/op
BenchmarkBalance-2   1	 668881119 ns/op	         1.000 int-max/mean	         1.008 uuid-max/mean
BenchmarkReceipts    	receipts_test.go:12: a log line
BenchmarkPartitionInt/38digits-2          	  565683	       516.8 ns/op
PASS`
	bs := parseGoBench(out)
	require.Len(t, bs, 3)
	require.Equal(t, "PartitionString", bs[0].Name)
	require.Equal(t, Sample{181.2, 191.2}, bs[0].Metric("ns/op"))
	require.Equal(t, Sample{1.008}, bs[1].Metric("uuid-max/mean"))
	require.Equal(t, "PartitionInt/38digits", bs[2].Name)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestResizeReport renders the resize scenario's section and goals from fixed figures.
func TestResizeReport(t *testing.T) {
	r := &Results{Options: Options{Reps: 2}.withDefaults(), Errors: map[string]string{}, Resize: &Resize{
		Config:   ResizeConfig{From: 2, To: 6, At: 1.0 / 3, Sleep: 50 * time.Millisecond, Concurrency: 4, LeaseTTL: 3 * time.Second},
		Items:    3000,
		Wall:     map[string]Sample{ResizeFrom: {20, 22}, ResizeTo: {8, 8}, ResizeScaled: {12, 13.2}},
		RCU:      map[string]Sample{ResizeFrom: {50, 50}, ResizeTo: {50, 50}, ResizeScaled: {52, 56}},
		ScaledAt: Sample{1000, 1010},
	}}
	md := r.Markdown(nil)
	for _, want := range []string{
		"## Elastic fleet: scaling a running job",
		"| (a) 2 slots alone | 21.0 s (20.0–22.0) | 50.0 (50.0–50.0) |",
		"| (c) 2 → 6 slots mid-job | 12.6 s (12.0–13.2) |",
		"| **(c) ÷ (a)** | **0.60x (0.60–0.60)** (ideal 0.56x) |",
		"| **(c) ÷ (b)** | **1.57x (1.50–1.65)** (ideal 1.67x) | **1.08x (1.04–1.12)** (goal <= 1.1x) |",
		"| 2 → 6 slots mid-job: the job's scan RCU ÷ one pass (6 slots from the start) | <= 1.1x (segment mode reads nothing again) | 1.08x (1.04–1.12) | **NOT met** |",
		"| 2 → 6 slots mid-job: wall ÷ 2 slots alone | < 1x (ideal without re-plan cost: 0.56x) | 0.60x (0.60–0.60) | met |",
	} {
		require.Contains(t, md, want)
	}
	r.Resize = nil
	r.Errors[ScenarioResize] = "boom"
	require.Contains(t, r.Markdown(nil), "*Not measured in this run: boom.*")
}

// TestWriteCost runs a tiny write-cost scenario: Run's writes are captured (one complete-only
// write, a claim and a completion per item), replayed and timed, and the report shows them.
func TestWriteCost(t *testing.T) {
	_, res := quickRun(t, Options{Reps: 2, Items: 400, Quick: true, Only: []string{ScenarioWriteCost}})
	require.Empty(t, res.Errors)
	wc := res.WriteCost
	require.NotNil(t, wc)
	for _, s := range []Sample{wc.Hand, wc.CompleteOnly, wc.Claim, wc.Completion,
		wc.Run.Write, wc.Loop.Write, wc.Run.ItemsPerSec, wc.Loop.ItemsPerSec} {
		require.Len(t, s, 2)
		require.Positive(t, s.Min())
	}
	md := res.Markdown(Plots{})
	for _, want := range []string{"## Where the time goes at concurrency 1", "| **Run, claim + completion** |",
		"| item write, µs (mean) |", "beyond the hand loop's"} {
		require.Contains(t, md, want)
	}
}

// TestTransform runs a tiny transform and billing scenario on DynamoDB Local: the three variants
// migrate every item, each mode's write units per item are at their floor on the job's table by
// DynamoDB's billing rules, and the report shows the sections and goals.
func TestTransform(t *testing.T) {
	env, res := quickRun(t, Options{Reps: 2, Items: 200, Quick: true, Only: []string{ScenarioTransform, ScenarioBilling}, Concurrencies: []int{4}})
	require.Empty(t, res.Errors)
	servers := 0 // DynamoDB Local's CPU is read where its process is found by its port (as TestCPUScenario)
	if listenerPID(env.Endpoint) != 0 {
		servers = 2
	}
	for _, v := range []string{VariantMigrationLoop, VariantTransform, VariantTransform4} {
		c := res.Transform.Cell(v, 4)
		require.NotNil(t, c, v)
		require.Len(t, c.ItemsPerSec, 2, v)
		require.Positive(t, c.ItemsPerSec.Min(), v)
		require.GreaterOrEqual(t, c.Cost.TableWCU.Min(), 1.0, v) // one write per item (a little more
		require.LessOrEqual(t, c.Cost.TableWCU.Max(), 1.5, v)    // after a lease lost by load)
		require.GreaterOrEqual(t, c.Cost.Requests.Min(), 1.0, v)
		require.Len(t, c.CPU.Client, 2, v)
		require.Positive(t, c.CPU.Client.Min(), v)
		require.Len(t, c.CPU.Server, servers, v)
	}
	require.Equal(t, Sample{1, 1}, res.Transform.Cell(VariantMigrationLoop, 4).Cost.WCU)
	tw := res.TransformWrites.Point(4)
	require.NotNil(t, tw)
	require.Len(t, tw.Loop, 2) // a quick run's two rounds
	require.Len(t, tw.Ledger, 2)
	require.Len(t, tw.State, 2)
	require.Positive(t, tw.Loop.Min())
	require.Positive(t, tw.Ledger.Min())
	require.Positive(t, tw.State.Min())
	require.Len(t, tw.LoopCPU.Client, 2)
	require.Len(t, tw.StateCPU.Client, 2)
	require.Len(t, tw.LedgerCPU.Server, servers)

	for v, floor := range map[string]float64{VariantPlain: 1, VariantCompleteOnly: 1, VariantClaim: 2, VariantMigrationLoop: 1, VariantTransform: 1} {
		c := res.Billing.Cell(v, BillingConcurrency)
		require.NotNil(t, c, v)
		// The floor, or a little more when a loaded machine makes a worker lose its lease and
		// write again for the items it had in flight (refused writes are billed too).
		require.GreaterOrEqual(t, c.Cost.TableWCU.Min(), floor, v)
		require.LessOrEqual(t, c.Cost.TableWCU.Max(), floor+0.5, v)
		require.Positive(t, c.Cost.RCU.Min(), v)
	}
	batched := res.Billing.Cell(VariantBatched, BillingConcurrency).Cost
	claim := res.Billing.Cell(VariantClaim, BillingConcurrency).Cost
	require.GreaterOrEqual(t, batched.TableWCU.Min(), 2.0) // claims and completions, 1 to 2 WCU each
	require.Less(t, batched.Requests.Max(), claim.Requests.Min(), "batches save requests")

	md := res.Markdown(Plots{})
	for _, want := range []string{
		"## A transform job versus the hand-written migration loop", "## What a job costs by DynamoDB's billing rules",
		"| Run, transform vs hand migration loop, items/s | >= 0.9x at every concurrency | c=4: ",
		"| concurrency | hand migration loop items/s | Run, transform | Run, transform, 4 segments |",
		"| CPU µs per item, this process / DynamoDB Local: loop · Run |",
		"| Run, transform: WCU per item by DynamoDB's billing rules | 1.0, the loop's own",
		"| … its completion write alone vs the loop's write, keys known (no scan), items/s | reported (the ceiling of the ratio above on DynamoDB Local) | c=4: ",
		"| … the loop's write with the completion's three state attributes vs the loop's write, items/s | reported (what storing the item's state costs DynamoDB Local) | c=4: ",
		"### The completion write alone", "| concurrency | loop's write items/s | with the state items/s | completion write items/s | with the state ÷ loop | completion ÷ with the state | completion ÷ loop | CPU µs per write, this process / DynamoDB Local: loop · with the state · completion |\n|---|---|---|---|---|---|---|---|\n| 4 | ",
		"| Run, batched claims: WCU per item by DynamoDB's billing rules | <= 2.2 WCU per item in <= 0.15 requests per item",
		"| Run, claim+complete | ", "| hand migration loop | 1.0", "2 WCU, in requests of up to 25",
	} {
		require.Contains(t, md, want)
	}
}

// The hand migration loop is safe to rerun: a second pass finds nothing to migrate and writes
// nothing, and a write from a stale scan of a migrated item fails its condition.
func TestMigrationLoopRerun(t *testing.T) {
	env := &Env{DB: ddbtest.Client(t), Endpoint: ddbtest.Endpoint(t)}
	ctx := context.Background()
	table, err := env.freshTableOf(ctx, "rerun", 60, personItem)
	require.NoError(t, err)
	defer env.dropTable(table)
	db := newBillingDB(env.DB, nil)
	n, err := migrationLoop(ctx, db, table, 4)
	require.NoError(t, err)
	require.Equal(t, int64(60), n)
	require.NoError(t, env.checkMigrated(ctx, table, 60))
	n, err = migrationLoop(ctx, db, table, 4)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, int64(60), db.Bill().ByOp["UpdateItem"]) // the rerun's scan filtered every item out

	_, err = db.UpdateItem(ctx, migrationWrite(table, personItem(7)))
	var ccf *types.ConditionalCheckFailedException
	require.ErrorAs(t, err, &ccf)
	require.Equal(t, 61.0, db.Bill().Tables[table].WCU) // a failed condition is billed too
}
