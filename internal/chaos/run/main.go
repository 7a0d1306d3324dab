// Command run is `make chaos`: the long version of the chaos, fault and bad-input scenarios against
// DynamoDB Local. It writes RELIABILITY.md: what was tried, per scenario the counts of every run
// with its seed, whether the invariants held, the bad-input catalogue and the longer fuzz runs.
//
//	go run ./internal/chaos/run -out RELIABILITY.md [-seed N] [-reps 3] [-items 10000] [-fuzztime 60s]
//	    [-sweep-per-combo 6 | -sweep-per-combo 0 -sweep-stride 7] [-model-checks 400]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/internal/chaos"
	"github.com/dynapart/dynapart/internal/sweep"
	"github.com/dynapart/dynapart/localstack"
)

func main() {
	out := flag.String("out", "RELIABILITY.md", "report file")
	seed := flag.Uint64("seed", 0, "first seed (0: from the clock); run i uses seed+i")
	reps := flag.Int("reps", 3, "repetitions per scenario")
	items := flag.Int("items", 10000, "items per run")
	fuzztime := flag.Duration("fuzztime", 60*time.Second, "time per fuzz target (0 skips fuzzing)")
	endpoint := flag.String("endpoint", os.Getenv("DYNAPART_TEST_ENDPOINT"), "DynamoDB Local to use (default: start one)")
	only := flag.String("only", "", "run only the scenarios whose name contains this")
	sweepPer := flag.Int("sweep-per-combo", 6, "the fault sweep: every combination's baseline and a seeded sample (the run's seed) of so many faulted runs per combination, about 10 minutes on 2 cores; 0: the stride sweep (-sweep-stride)")
	modelChecks := flag.Int("model-checks", 400, "sequences per ledger and backend of the ledger's model-based test (0 skips it)")
	sweepStride := flag.Int("sweep-stride", 7, "with -sweep-per-combo 0, the exhaustive sweep runs each fault kind at every stride-th k (7, the number of kinds: every k meets one kind, about 90 minutes; 1: every kind at every k)")
	flag.Parse()
	if err := run(*out, *seed, *reps, *items, *fuzztime, *endpoint, *only, *modelChecks, sweep.Plan{Stride: *sweepStride, PerCombo: *sweepPer}); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(out string, seed uint64, reps, items int, fuzztime time.Duration, endpoint, only string, modelChecks int, sweepPlan sweep.Plan) error {
	ctx := context.Background()
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	dir, err := os.MkdirTemp("", "dynapart-chaos-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := chaos.Binary(ctx, dir)
	if err != nil {
		return err
	}
	if endpoint == "" {
		srv, err := localstack.Start(ctx, localstack.Options{})
		if err != nil {
			return err
		}
		defer srv.Stop()
		endpoint = srv.Endpoint()
	}
	env := chaos.Env{
		AWS:      aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("dynapart", "local", "")},
		Endpoint: endpoint, Bin: bin, Dir: dir,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	}
	type scenario struct {
		name, title, what string
		fn                func(context.Context, chaos.Env, chaos.Params) *chaos.Result
		p                 chaos.Params
	}
	big := time.Duration(items/1000+3) * time.Minute
	scenarios := []scenario{
		{"sigkill", "SIGKILL of slot holders", "`dynapart work --once --batch-claims --exec` processes, 3 slots + 2 standbys; 5 slot holders are killed with SIGKILL at random moments (seeded), a new standby joins after each. Side effects are the --exec log. The handler fails the first run of 10% of the items (exit 75, retried) and every run of 2% (exit 65, dead-lettered): those must end failed, every other item done.",
			chaos.Kill, chaos.Params{Items: items, Slots: 3, Standbys: 2, Kills: 5, Timeout: big, Transient: 0.1, Permanent: 0.02}},
		{"sigstop", "SIGSTOP past the lease and claim TTL", "A random slot holder (filter mode, claim TTL 3s, lease TTL 2s) is frozen with SIGSTOP until a standby has taken its slot and its claims have expired, then resumed with SIGCONT. It must report its lease lost and complete nothing another worker claimed since (the ledger audit).",
			chaos.Freeze, chaos.Params{Items: items, Timeout: big}},
		{"faults", "Fault-injecting proxy", "Every worker request goes through a reverse proxy that answers 2% each with ProvisionedThroughputExceededException, ThrottlingException, HTTP 500, a connection reset, a lost response (forwarded, then the connection reset) and 0.5% with a response held 2.5s. The handler fails the first run of 10% of the items (exit 75, retried) and every run of 2% (exit 65, dead-lettered): those must end failed, every other item done.",
			chaos.Faults, chaos.Params{Items: items / 2, Timeout: big, Transient: 0.1, Permanent: 0.02}},
		{"partition", "A slot holder cut off DynamoDB past its lease, then reconnected", "One slot holder talks to DynamoDB through its own proxy; at a random moment the proxy cuts it off (requests held, then their connections reset) until a standby has taken its slot over and 0.5-2s more, then reconnects it. Every write it sends after the reconnect that is fenced by its lost lease (lease writes with its token, claim writes with its owner, slot and token) must be refused; the details list them by kind, a landed one is a violation.",
			chaos.Partition, chaos.Params{Items: items / 2, Timeout: big}},
		{"two-groups", "Two groups on one table at once", "Two groups (different group names, the same job, inline ledger and lease table), 2 slots + 1 standby each, process the same table at the same time, so each meets the other's claims. The handler marks its item in flight (an atomic mkdir) for 50ms: two handlers of one item at once across the groups is a stolen claim (a violation); inside a group it may follow a takeover (bounded like the side effects). Each group's lease history is checked on its own.",
			chaos.TwoGroups, chaos.Params{Items: items / 4, Timeout: big}},
		{"restart", "DynamoDB Local stopped and restarted", "The workers' own DynamoDB Local (-dbPath) is stopped at a random moment and started again on the same port and folder 0.5-3s later.",
			chaos.Restart, chaos.Params{Items: items / 2, Timeout: big}},
		{"resize-segment", "Resize mid-job with a SIGKILL during the re-plan (segment mode)", resizeWhat("segment", "every segment's cursor moves to its new owner: nothing is read again"),
			chaos.Resize, chaos.Params{Items: items * 3 / 5, Mode: "segment", Timeout: big}},
		{"resize-filter", "Resize mid-job with a SIGKILL during the re-plan (filter mode)", resizeWhat("filter", "each slot rescans its new share; items done are skipped without a handler call"),
			chaos.Resize, chaos.Params{Items: items * 3 / 5, Mode: "filter", Timeout: big}},
		{"resize-index", "Resize mid-job with a SIGKILL during the re-plan (index mode)", resizeWhat("index", "16 shards; each shard's cursor moves to its new owner"),
			chaos.Resize, chaos.Params{Items: items * 3 / 5, Mode: "index", Timeout: big}},
		{"effects-sigkill", "Effects under SIGKILL", effectsWhat + " 3 slots + 2 standbys; 5 slot holders are killed with SIGKILL at random moments (seeded).",
			chaos.Kill, chaos.Params{Items: items, Slots: 3, Standbys: 2, Kills: 5, Timeout: big, Effects: true}},
		{"effects-faults", "Effects through the fault-injecting proxy", effectsWhat + " Every request goes through the proxy of the faults scenario (throttles, 500s, connection resets, lost and held responses).",
			chaos.Faults, chaos.Params{Items: items / 2, Timeout: big, Effects: true}},
		{"effects-partition", "Effects with a slot holder cut off past its lease", effectsWhat + " One slot holder is cut off DynamoDB past its lease and reconnected, as in the partition scenario: its commits after the reconnect must be refused with everything they carry.",
			chaos.Partition, chaos.Params{Items: items / 2, Timeout: big, Effects: true}},
		{"follow", "Following the stream: back-fill while the table changes, a SIGKILL and a SIGSTOP (inline ledger)", followWhat("inline"),
			chaos.Follow, chaos.Params{Items: items * 3 / 10, Kills: 2, Timeout: big}},
		{"follow-table", "Following the stream: back-fill while the table changes, a SIGKILL and a SIGSTOP (table ledger)", followWhat("table"),
			chaos.FollowTableLedger, chaos.Params{Items: items / 10, Kills: 1, Timeout: big}},
		{"skew", "Clock skew within MaxClockSkew", "In-process workers whose clocks are offset by up to ±250ms (MaxClockSkew 500ms); 3 random slot holders are crashed (every DynamoDB call fails from then on) and standbys take over by their own clocks.",
			chaos.Skew, chaos.Params{Items: items, Kills: 3, Timeout: big}},
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "# Reliability\n\nWritten by `make chaos` (`go run ./internal/chaos/run`) on %s, %s/%s, %d CPUs, %s. First seed %d; run i of a scenario uses seed+i. Replay a run with `go run ./internal/chaos/run -only NAME -seed SEED -reps 1 -items N`, or its short version with `CHAOS_SEED=SEED go test -run TestChaos... ./internal/chaos/`.\n\n",
		time.Now().UTC().Format(time.RFC3339), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), seed)
	md.WriteString(`Every run checks, from the ledger, the workers' record files (a line per completion, written after it), the
handler side-effect log and the lease history: every write to the lease table's slot items, read from the table's
DynamoDB stream (new and old images), so no state is missed however briefly it lasted:

- **completed twice** (must be 0): a key in two completion records, or a record that the ledger contradicts;
- **missing** (must be 0): items neither done nor, for a handler that always fails permanently, dead-lettered
  when every worker has exited; an item dead-lettered whose handler never failed permanently, or done whose handler
  always fails, is a violation;
- **side-effect duplicates**: handler runs beyond the first per item; allowed only for items in flight at a kill,
  freeze or fault. The bound: concurrency + max(concurrency, 25) + 25 per SIGKILL (handlers running, handled items waiting
  for a batched completion, and the batch being written), the concurrency per freeze, partition or
  in-process crash, the concurrency of every worker per DynamoDB restart, one per injected fault, the concurrency
  per takeover or retake inside a group (two groups); in the SIGKILL, SIGSTOP, partition and resize scenarios also
  the same per lease a worker reports lost by load (**leases lost by load**: on a busy machine DynamoDB Local can
  take longer than a lease's TTL to answer the renewals, and the worker stops writing under the lease, as it must);
- **unrecorded**: done items no record lists (a SIGKILL between the completion and its record line, or a
  completion whose response was lost);
- the lease history: a slot's token never decreases, a token never has two owners, and a new token is taken only
  from a released lease or at or after the previous holder's expires_at (no two holders at once); every done item's
  claim (slot, token) belongs to the owner that completed it.

`)
	failed := 0
	for _, s := range scenarios {
		if only != "" && !strings.Contains(s.name, only) {
			continue
		}
		var runs []*chaos.Result
		for i := range reps {
			p := s.p
			p.Seed = seed + uint64(i)
			r := s.fn(ctx, env, p)
			if !r.OK() {
				failed++
			}
			runs = append(runs, r)
		}
		chaos.WriteMarkdown(&md, s.title, s.what, runs)
	}
	if modelChecks > 0 && (only == "" || strings.Contains("model", only)) {
		failed += runModel(&md, endpoint, dir, seed, modelChecks, 80)
	}
	if only == "" || strings.Contains("sweep", only) {
		sweepPlan.Seed = seed
		s := runSweep(ctx, env, sweepPlan)
		sweep.WriteMarkdown(&md, s)
		if s.Broken > 0 || s.Runs == 0 {
			failed++
		}
	}
	if only == "" || strings.Contains("badinput iam logs", only) {
		md.WriteString("## Bad input, IAM and logs\n\nThe catalogue runs as Go tests (`internal/chaos/badinput_test.go`, `iam_test.go`, `logs_test.go`); `--exec` injection is `cmd/dynapart/internal/work` `TestExecIsInjectionProof`.\n\n```\n")
		cmd := exec.Command("go", "test", "-count=1", "-v", "-run", "^(TestBadInput|TestIAM|TestLogs)", "./internal/chaos/")
		cmd.Env = append(os.Environ(), "DYNAPART_TEST_ENDPOINT="+endpoint)
		b, err := cmd.CombinedOutput()
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "--- ") || strings.HasPrefix(l, "ok") || strings.HasPrefix(l, "FAIL") {
				md.WriteString(l + "\n")
			}
		}
		md.WriteString("```\n\n")
		if err != nil {
			failed++
		}
	}
	if fuzztime > 0 && only == "" {
		fmt.Fprintf(&md, "## Fuzzing\n\n`go test -run '^$' -fuzz T -fuzztime %s` per target:\n\n| package | target | outcome |\n|---|---|---|\n", fuzztime)
		root, _ := chaos.ModuleRoot()
		for _, t := range [][2]string{{"./scan", "FuzzPartition"}, {"./scan", "FuzzDecodeCheckpoint"}, {"./worker", "FuzzDecodeSlotCheckpoint"},
			{"./worker", "FuzzConfig"}, {"./cmd/dynapart/internal/cli", "FuzzParseKeySpec"},
			{"./cmd/dynapart/internal/partition", "FuzzParseKeyValue"}, {"./cmd/dynapart/internal/root", "FuzzEnvConfig"}} {
			cmd := exec.Command("go", "test", "-run", "^$", "-fuzz", "^"+t[1]+"$", "-fuzztime", fuzztime.String(), t[0])
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "DYNAPART_TEST_ENDPOINT="+endpoint)
			b, err := cmd.CombinedOutput()
			outcome := "passed"
			if err != nil {
				outcome = "**FAILED**: " + lastLine(string(b))
				failed++
			} else if l := execLine(string(b)); l != "" {
				outcome = "passed (" + l + ")"
			}
			fmt.Fprintf(&md, "| %s | %s | %s |\n", t[0], t[1], outcome)
			fmt.Fprintf(os.Stderr, "fuzz %s %s: %s\n", t[0], t[1], outcome)
		}
		md.WriteString("\n")
	}
	fmt.Fprintf(&md, "## Verdict\n\n%d failing runs or checks.\n", failed)
	if err := os.WriteFile(filepath.Clean(out), md.Bytes(), 0o644); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d failing runs or checks; see %s", failed, out)
	}
	return nil
}

// effectsWhat describes the effects scenarios.
const effectsWhat = "`dynapart work --once --exec ... --exec-effects`: every completion commits effects, an update of the item (its own counter + 1, the name of one of nine shared counters, by the first digit of the key's cksum) " +
	"and that shared counter + 1 on another table. From the tables alone: every done item's own counter must be exactly 1 and every other's missing, " +
	"and every shared counter must equal the done items that name it, whatever repeated."

// resizeWhat describes the resize scenario in mode.
func resizeWhat(mode, cost string) string {
	return "`dynapart work --once --batch-claims --mode " + mode + " --exec` processes (handler sleeps 20ms; lease TTL 5s, heartbeat 1s), 2 slots + 1 standby. " +
		"At a random moment (15-30% done, seeded) `dynapart scale` takes the group to 5 slots and 2 new workers start without --workers (they join at the group's n); " +
		"0-1.5s later one worker that held a slot under the old plan gets SIGKILL while the fleet re-plans, and a replacement joins. At 55-70% done " +
		"`dynapart scale` takes the group down to 3 slots. In " + mode + " mode " + cost + ". Every worker left must exit 0, the group must end at n 3, " +
		"plan epoch 2, and side effects may repeat only for the items in flight at the kill (the resizes alone repeat none)."
}

// followWhat describes the follow scenario with the given ledger.
func followWhat(ledger string) string {
	return "`dynapart init --stream`, then `dynapart work --follow --workers 2 --ledger " + ledger + " --exec` processes, 2 slots + 1 standby (lease TTL 8s, heartbeat 1s, claim TTL 15s, --max-attempts 50: the handler never fails, stream read every 200ms). " +
		"From the workers' start until 3s after the last fault (held while no slot holder follows the stream after 20s of writes past the back-fill's first passes: see below) a writer changes the table, an operation every 10ms: an update of an item's n (40%), 2-4 updates of one item in quick succession (15%), " +
		"a rewrite of an item's current n (15%: no new content), a delete (10%), an insert of a new item (20%, a third updated at once); every value it writes is new. " +
		"Once a worker follows the stream, the slot holder that reads a stream shard gets SIGKILL (a replacement joins; twice with the inline ledger, once with the table ledger), then a random slot holder is frozen with SIGSTOP past its lease (until a standby has taken its slot, and 0.5-1.5s more) and resumed: it must report its lease lost. " +
		"When every live item's latest value has been handled and the ledger records it done at its content's version (or 2 minutes after the writer stopped), the workers get SIGTERM and must exit 0. " +
		"Checked from the handler log (key, value, DYNAPART_VERSION, worker, lease and start of every run) and every completion (each write that moved an item to done, read from the stream of the table that holds the ledger): " +
		"every live item's latest value was handled and the ledger records it done at its content's version (**missing** counts the others); an item's values are handled and completed in the writer's order, never one after a newer one; " +
		"no version is completed twice (**completed twice**); a value is handled again only by runs that never completed because their worker was killed or frozen holding the lease they ran under, or lost it by load (**side-effect dups**: runs beyond the first per value; bound: the concurrency per fault and per lease lost by load), " +
		"so neither a rewrite of the same value nor a deleted item is handled again; DYNAPART_VERSION is one version per value and the ledger's for the latest; no deleted item is back. **items** are the live items at the end, **done** those recorded done at their content's version."
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.ReplaceAll(ls[len(ls)-1], "|", "\\|")
}

// execLine sums up the fuzzer's last progress line, e.g. "elapsed: 1m1s, execs: 514704 (0/sec)",
// as "1m1s, 514704 execs (8438/s)": the rate on that line is the last instant's, often 0, so the
// average is computed.
func execLine(s string) string {
	last := ""
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "fuzz: elapsed:") {
			last = strings.TrimPrefix(l, "fuzz: ")
		}
	}
	m := execRe.FindStringSubmatch(last)
	if m == nil {
		return last
	}
	d, err1 := time.ParseDuration(m[1])
	n, err2 := strconv.ParseInt(m[2], 10, 64)
	if err1 != nil || err2 != nil || d <= 0 {
		return last
	}
	return fmt.Sprintf("%s, %d execs (%.0f/s)", m[1], n, float64(n)/d.Seconds())
}

// runSweep runs the deterministic fault sweep (package sweep) over every combination.
func runSweep(ctx context.Context, env chaos.Env, p sweep.Plan) *sweep.Summary {
	cfg := env.AWS.Copy()
	cfg.BaseEndpoint = aws.String(env.Endpoint)
	f, err := sweep.NewFixture(ctx, dynamodb.NewFromConfig(cfg))
	if err != nil {
		env.Logf("sweep: %v", err)
		return &sweep.Summary{Plan: p}
	}
	defer func() { _ = f.Close(ctx) }()
	s := f.Sweep(ctx, p, func(r *sweep.Result) {
		if !r.OK() {
			env.Logf("sweep: %s", r)
		}
	})
	env.Logf("sweep: %d combinations, %d runs, %d faults injected, %d runs with violations, %s", s.Combos, s.Runs, s.Injected, s.Broken, s.Wall.Round(time.Second))
	return s
}

var execRe = regexp.MustCompile(`elapsed: (\S+), execs: (\d+)`)
