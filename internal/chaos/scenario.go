package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dynapart/dynapart/internal/progress"
	"github.com/dynapart/dynapart/scan"
)

// Env is what every scenario needs.
type Env struct {
	// AWS is the base config of direct clients (audits, the lease watcher): credentials, region and
	// HTTP client. Its BaseEndpoint is replaced by the scenario's endpoint.
	AWS aws.Config
	// Endpoint is the shared DynamoDB (Local) the scenarios use, except the restart scenario,
	// which runs its own server.
	Endpoint string
	// Bin is the dynapart binary (see Binary).
	Bin string
	// Dir holds the scenario's scratch files (record files, logs, -dbPath).
	Dir string
	// Logf receives progress notes; nil discards them.
	Logf func(format string, args ...any)
}

func (e Env) logf(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
	}
}

// Streams returns a DynamoDB Streams client for endpoint (the lease history reads the lease
// table's stream).
func (e Env) Streams(endpoint string) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(e.AWS, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	})
}

// Client returns a DynamoDB client for endpoint.
func (e Env) Client(endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(e.AWS, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = true
	})
}

// Params size a scenario run.
type Params struct {
	Seed        uint64
	Items       int           // items in the table. Defaults to 1000.
	Slots       int           // N. Defaults to 2.
	Standbys    int           // extra workers. Defaults to 1.
	Kills       int           // SIGKILLs (kill scenario). Defaults to 3.
	Concurrency int           // handlers in flight per worker. Defaults to 8.
	Timeout     time.Duration // the whole run. Defaults to 8m: alone a run takes about a minute; the rest is for a loaded machine.
	// FaultRate is the share of requests given each fault (fault scenario). Defaults to 0.02.
	FaultRate float64
	// Transient is the share of items whose handler fails its first run (exit 75), Permanent the
	// share whose handler always fails permanently (exit 65: dead-lettered at once). Both 0 by
	// default: every handler succeeds. See flaky.go.
	Transient, Permanent float64
	// Mode is the workers' --mode (segment, filter or index); "" leaves the work default (segment).
	// Index mode creates the pending index and puts every item in it.
	Mode string
	// Effects makes the handler commit effects with each completion (see effects.go).
	Effects bool
}

func (p *Params) defaults() {
	if p.Items <= 0 {
		p.Items = 1000
	}
	if p.Slots <= 0 {
		p.Slots = 2
	}
	if p.Standbys <= 0 {
		p.Standbys = 1
	}
	if p.Kills <= 0 {
		p.Kills = 3
	}
	if p.Concurrency <= 0 {
		p.Concurrency = 8
	}
	if p.Timeout <= 0 {
		p.Timeout = 8 * time.Minute
	}
	if p.FaultRate <= 0 {
		p.FaultRate = 0.02
	}
}

// Result is what a scenario run tried and what held.
type Result struct {
	Scenario string
	Seed     uint64
	Params   Params

	Items                int
	Done                 int
	Failed               int // dead-lettered: must be exactly the permanently failing items
	PermanentItems       int // items whose handler always fails (Params.Permanent)
	TransientFailures    int // handler runs that failed transiently (Params.Transient), each retried
	CompletedTwice       int // must be 0
	Missing              int // must be 0: items neither done nor (permanently failing and) failed
	SideEffectDuplicates int // handler runs beyond the first, per item
	SideEffectBound      int // the most the scenario allows: items in flight at its kills, freezes and faults
	Unrecorded           int // done items no worker's record file lists (a kill between completion and record)
	Takeovers            int
	LeasesLost           int // leases lost by load (renewals that did not land in time), see fixture.countLeaseLosses
	Wall                 time.Duration

	Events     []string       // what the scenario did, in order
	Faults     map[string]int // injected faults by kind and operation
	Leases     LeaseReport
	Violations []string // broken invariants; empty when everything held
}

func (r *Result) fail(format string, args ...any) {
	if len(r.Violations) < 50 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

func (r *Result) event(format string, args ...any) {
	r.Events = append(r.Events, fmt.Sprintf(format, args...))
}

// OK reports whether every guarantee held.
func (r *Result) OK() bool {
	return r.CompletedTwice == 0 && r.Missing == 0 && len(r.Violations) == 0 && r.SideEffectDuplicates <= r.SideEffectBound
}

// Summary is one line for logs.
func (r *Result) Summary() string {
	return fmt.Sprintf("%s seed=%d items=%d done=%d twice=%d missing=%d side-effect-dups=%d (bound %d) unrecorded=%d takeovers=%d leases-lost=%d wall=%s ok=%v",
		r.Scenario, r.Seed, r.Items, r.Done, r.CompletedTwice, r.Missing, r.SideEffectDuplicates, r.SideEffectBound,
		r.Unrecorded, r.Takeovers, r.LeasesLost, r.Wall.Round(time.Millisecond), r.OK())
}

// fixture is one scenario's tables, files and processes.
type fixture struct {
	env      Env
	p        Params
	rng      *mrand.Rand
	endpoint string // what the workers talk to
	direct   string // what setup and audits talk to
	db       *dynamodb.Client
	table    string
	leases   string
	dir      string
	effects  string
	flaky    *flaky // nil: every handler succeeds
	notify   chan struct{}
	procs    []*Proc
	watcher  *LeaseWatcher
	res      *Result
	n        int                         // workers started
	perLoss  int                         // items a lease lost by load may repeat (0: the scenario's bound covers every loss)
	audits   []func(r *Result, a *audit) // scenario checks run at the end of finish
}

func newFixture(ctx context.Context, env Env, name string, p Params, direct string) (*fixture, error) {
	p.defaults()
	var sfx [4]byte
	_, _ = rand.Read(sfx[:])
	id := fmt.Sprintf("chaos-%s-%d-%s", name, p.Seed, hex.EncodeToString(sfx[:]))
	f := &fixture{
		env: env, p: p, rng: mrand.New(mrand.NewPCG(p.Seed, 0x5eed)),
		endpoint: direct, direct: direct, db: env.Client(direct),
		table: id, leases: id + "-leases", dir: filepath.Join(env.Dir, id), notify: make(chan struct{}, 1),
		res: &Result{Scenario: name, Seed: p.Seed, Params: p},
	}
	f.effects = filepath.Join(f.dir, "side-effects.log")
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, err
	}
	if err := f.cli(ctx, "init", "--table", f.table, "--key", "id:S", "--lease-table", f.leases); err != nil {
		return nil, err
	}
	if err := f.cli(ctx, "seed", "--table", f.table, "--items", fmt.Sprint(p.Items)); err != nil {
		return nil, err
	}
	if p.Mode == string(scan.ModeIndex) {
		if err := f.cli(ctx, "init", "--table", f.table, "--key", "id:S", "--lease-table", f.leases, "--index"); err != nil {
			return nil, err
		}
		if err := f.markPending(ctx); err != nil {
			return nil, err
		}
	}
	if p.Transient > 0 || p.Permanent > 0 {
		var err error
		if f.flaky, err = newFlaky(f.dir, p, f.rng); err != nil {
			return nil, err
		}
	}
	if p.Effects {
		if err := f.cli(ctx, "init", "--table", f.counters(), "--key", "pk:S", "--lease-table", f.leases); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// cli runs a dynapart command against the direct endpoint.
func (f *fixture) cli(ctx context.Context, args ...string) error {
	args = append(args, "--endpoint", f.direct)
	cmd := exec.CommandContext(ctx, f.env.Bin, args...)
	cmd.Env = cliEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: dynapart %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// cliEnv is the environment of CLI processes: no DYNAPART_* settings or AWS credentials of the
// caller, so DynamoDB Local's static credentials apply.
func cliEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DYNAPART_") || strings.HasPrefix(kv, "AWS_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (f *fixture) group() string { return f.table + "/default" }

// watch starts the lease history.
func (f *fixture) watch() {
	f.watcher = WatchLeases(f.db, f.env.Streams(f.direct), f.leases, f.group(), 20*time.Millisecond)
}

// workArgs are the work flags every scenario shares; extra flags are appended (the last wins).
func (f *fixture) workArgs(extra ...string) []string {
	args := []string{"--endpoint", f.endpoint, "--table", f.table, "--lease-table", f.leases,
		"--workers", fmt.Sprint(f.p.Slots), "--once", "--lease-ttl", "2s", "--heartbeat", "400ms",
		"--standby-poll", "200ms", "--max-clock-skew", "250ms", "--page-size", "100",
		"--concurrency", fmt.Sprint(f.p.Concurrency), "--claim-ttl", "10s", "--poll-interval", "1s",
		"--retry-backoff", "200ms", "--log-level", "info", "--exec", f.handler()}
	if f.p.Effects {
		args = append(args, "--exec-effects")
	}
	if f.p.Mode != "" {
		args = append(args, "--mode", f.p.Mode)
	}
	return append(args, extra...)
}

// handler is the --exec command: it appends the key to the side-effect log, after the flaky
// failures when the scenario has them.
func (f *fixture) handler() string {
	effect := fmt.Sprintf(`printf '%%s\n' "$DYNAPART_KEY" >> '%s'`, f.effects)
	if f.p.Effects {
		effect += f.effectsScript()
	}
	if f.flaky == nil {
		return effect
	}
	return f.flaky.script() + effect
}

// start starts one more worker.
func (f *fixture) start(extra ...string) (*Proc, error) {
	owner := fmt.Sprintf("w%d", f.n)
	f.n++
	p, err := StartWorker(f.env.Bin, f.dir, owner, f.notify, cliEnv(), f.workArgs(extra...)...)
	if err != nil {
		return nil, err
	}
	f.procs = append(f.procs, p)
	return p, nil
}

// startFleet starts Slots workers one by one (each waits for its lease, so slot holders and
// standbys are known), then the standbys.
func (f *fixture) startFleet(ctx context.Context, extra ...string) error {
	return f.startFleetWith(ctx, nil, extra...)
}

// startFleetWith is startFleet whose first worker (a slot holder) gets first's flags too.
func (f *fixture) startFleetWith(ctx context.Context, first []string, extra ...string) error {
	for i := range f.p.Slots {
		args := extra
		if i == 0 {
			args = append(append([]string(nil), extra...), first...)
		}
		p, err := f.start(args...)
		if err != nil {
			return err
		}
		if _, err := p.WaitLine(ctx, 0, func(l progress.Line) bool { return l.Event == "lease-acquired" }); err != nil {
			return fmt.Errorf("%w\n%s", err, p.LogTail(2000))
		}
	}
	for range f.p.Standbys {
		if _, err := f.start(extra...); err != nil {
			return err
		}
	}
	return nil
}

// completed is the sum of every worker's completions (as of its last progress line).
func (f *fixture) completed() int64 {
	var n int64
	for _, p := range f.procs {
		n += p.Last().Completed
	}
	return n
}

func (f *fixture) anyAlive() bool {
	for _, p := range f.procs {
		if p.Alive() {
			return true
		}
	}
	return false
}

// waitCompleted waits until the fleet has completed n items (false: every worker exited first).
func (f *fixture) waitCompleted(ctx context.Context, n int64) (bool, error) {
	for {
		if f.completed() >= n {
			return true, nil
		}
		if !f.anyAlive() {
			return false, nil
		}
		select {
		case <-f.notify:
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
}

// pickHolder picks a random live worker that holds a slot and is working, waiting for one.
func (f *fixture) pickHolder(ctx context.Context) (*Proc, progress.Line, error) {
	for {
		var cands []*Proc
		for _, p := range f.procs {
			if l := p.Last(); p.Alive() && l.Slot >= 0 && l.State == "working" {
				cands = append(cands, p)
			}
		}
		if len(cands) > 0 {
			sort.Slice(cands, func(i, j int) bool { return cands[i].Owner < cands[j].Owner })
			p := cands[f.rng.IntN(len(cands))]
			return p, p.Last(), nil
		}
		if !f.anyAlive() {
			return nil, progress.Line{}, nil
		}
		select {
		case <-f.notify:
		case <-ctx.Done():
			return nil, progress.Line{}, context.Cause(ctx)
		}
	}
}

// thresholds returns k sorted completion counts spread over [lo, hi) of the items.
func (f *fixture) thresholds(k int, lo, hi float64) []int64 {
	out := make([]int64, k)
	for i := range out {
		out[i] = int64((lo + f.rng.Float64()*(hi-lo)) * float64(f.p.Items))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// finish waits for the fleet, stops the watcher and audits the table, the records and the side
// effects.
func (f *fixture) finish(ctx context.Context, start time.Time) *Result {
	r := f.res
	if err := waitAll(ctx, f.procs, time.Until(deadlineOf(ctx))); err != nil {
		r.fail("%v", err)
	}
	r.Wall = time.Since(start)
	for _, p := range f.procs {
		p.Stop()
		if !p.Killed() && p.ExitCode() != 0 {
			r.fail("worker %s exited with %d: %s", p.Owner, p.ExitCode(), lastLines(p.LogTail(4000), 6))
		}
	}
	if f.watcher != nil {
		f.watcher.Stop()
	}
	a := &audit{items: f.p.Items, records: map[string]map[string]int{}, sideEffect: map[string]int{}, lost: f.leasesLostByLoad(r)}
	if f.flaky != nil {
		a.permanent = f.flaky.permanent
		n, err := f.flaky.transientFailures()
		if err != nil {
			r.fail("%v", err)
		}
		r.TransientFailures = n
	}
	if f.watcher != nil {
		a.leases = f.watcher.Report()
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var err error
	if a.ledger, err = readLedger(actx, f.db, f.table, "id", "dp_"); err != nil {
		r.fail("%v", err)
		return r
	}
	for _, p := range f.procs {
		m := map[string]int{}
		if err := readLines(p.Record, m); err != nil {
			r.fail("%v", err)
		}
		a.records[p.Owner] = m
		if l := p.Last(); l.Takeovers > 0 {
			r.Takeovers += int(l.Takeovers)
		}
	}
	if err := readLines(f.effects, a.sideEffect); err != nil {
		r.fail("%v", err)
	}
	a.apply(r)
	for _, check := range f.audits {
		check(r, a)
	}
	if f.p.Effects {
		f.auditEffects(actx, r)
	}
	if f.flaky != nil {
		r.event("dead-lettered %d items (%d fail permanently); %d handler runs failed transiently and were retried",
			r.Failed, r.PermanentItems, r.TransientFailures)
	}
	return r
}

// countLeaseLosses makes every lease a worker reports lost, other than by the scenario's own
// kills, freezes and cuts, a failure of its own: perLoss more side-effect duplicates are allowed
// for it (the items its worker had in flight), and the checks that blame repeats on the scenario
// excuse the runs made under it. On a loaded machine (the chaos suite runs beside the other
// packages' tests, on two cores) DynamoDB Local can take longer than a lease's TTL to answer the
// renewals; the worker then stops writing under the lease, as it must, and what it had handled but
// not completed runs again. Scenarios whose bound already covers every loss do not call it.
func (f *fixture) countLeaseLosses(perLoss int) { f.perLoss = perLoss }

// leasesLostByLoad adds the leases lost by load to r (see countLeaseLosses) and returns them.
func (f *fixture) leasesLostByLoad(r *Result) map[[2]int64]bool {
	lost := map[[2]int64]bool{}
	if f.perLoss == 0 {
		return lost
	}
	var owners []string
	for _, p := range f.procs {
		for _, l := range p.LostLeases() {
			lost[l] = true
			owners = append(owners, fmt.Sprintf("%s (slot %d, token %d)", p.Owner, l[0], l[1]))
		}
	}
	if len(owners) > 0 {
		r.LeasesLost = len(owners)
		r.SideEffectBound += len(owners) * f.perLoss
		r.event("leases lost by load (renewals that did not land within the lease TTL): %s; the bound allows %d more each",
			strings.Join(owners, ", "), f.perLoss)
	}
	return lost
}

// cleanup deletes the tables (after a successful run; a failed one keeps them for a look).
func (f *fixture) cleanup(keep bool) {
	for _, p := range f.procs {
		p.Stop()
	}
	if keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, t := range []string{f.table, f.leases} {
		_, _ = f.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
	}
	_ = os.RemoveAll(f.dir)
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(10 * time.Minute)
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// run wraps a scenario body with its timeout, a fixture and cleanup.
func run(ctx context.Context, env Env, name string, p Params, direct string, body func(ctx context.Context, f *fixture) error) *Result {
	p.defaults()
	if p.Transient > 0 || p.Permanent > 0 {
		name += "-flaky"
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	f, err := newFixture(ctx, env, name, p, direct)
	if err != nil {
		r := &Result{Scenario: name, Seed: p.Seed, Params: p}
		r.fail("setup: %v", err)
		return r
	}
	env.logf("chaos: %s seed %d: %d items, %d slots + %d standby, table %s", name, p.Seed, p.Items, p.Slots, p.Standbys, f.table)
	if f.flaky != nil {
		f.res.event("handlers: %d items fail their first run (exit 75, retried), %d fail permanently (exit 65, dead-lettered)",
			len(f.flaky.transient), len(f.flaky.permanent))
	}
	start := time.Now()
	berr := body(ctx, f)
	if berr != nil {
		f.res.fail("%s: %v", name, berr)
		for _, pr := range f.procs {
			pr.Stop()
		}
	}
	r := f.finish(ctx, start)
	f.cleanup(!r.OK())
	env.logf("chaos: %s", r.Summary())
	return r
}

// Kill runs the fleet and SIGKILLs a random slot holder at Kills random moments; after each kill
// a new standby joins, so a standby always takes the slot over.
func Kill(ctx context.Context, env Env, p Params) *Result {
	return run(ctx, env, "sigkill", p, env.Endpoint, func(ctx context.Context, f *fixture) error {
		f.watch()
		extra := []string{"--batch-claims"}
		f.countLeaseLosses(batchInFlight(f.p.Concurrency))
		if err := f.startFleet(ctx, extra...); err != nil {
			return err
		}
		for _, th := range f.thresholds(f.p.Kills, 0.05, 0.85) {
			if ok, err := f.waitCompleted(ctx, th); err != nil || !ok {
				return err
			}
			victim, l, err := f.pickHolder(ctx)
			if err != nil || victim == nil {
				return err
			}
			victim.Kill()
			// In flight at a kill with --batch-claims: the handlers running (concurrency), the
			// handled items queued for a batched completion (concurrency) and the completion
			// transaction being written (25).
			f.res.SideEffectBound += batchInFlight(f.p.Concurrency)
			f.res.event("SIGKILL %s (slot %d, token %d) at %d/%d done", victim.Owner, l.Slot, l.Token, f.completed(), f.p.Items)
			if _, err := f.start(extra...); err != nil {
				return err
			}
		}
		return nil
	})
}

// Freeze SIGSTOPs a random slot holder until a standby has taken its slot over and past the claim
// TTL, then SIGCONTs it: it must report its lease lost, and complete nothing claimed by another
// since (checked by the ledger audit).
func Freeze(ctx context.Context, env Env, p Params) *Result {
	const claimTTL = 3 * time.Second
	return run(ctx, env, "sigstop", p, env.Endpoint, func(ctx context.Context, f *fixture) error {
		f.watch()
		extra := []string{"--mode", "filter", "--claim-ttl", claimTTL.String()}
		f.countLeaseLosses(f.p.Concurrency)
		if err := f.startFleet(ctx, extra...); err != nil {
			return err
		}
		if ok, err := f.waitCompleted(ctx, f.thresholds(1, 0.15, 0.5)[0]); err != nil || !ok {
			return err
		}
		victim, l, err := f.pickHolder(ctx)
		if err != nil || victim == nil {
			return err
		}
		victim.Fault()
		if err := victim.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		stopped := time.Now()
		linesAtStop := len(victim.Lines())
		f.res.event("SIGSTOP %s (slot %d, token %d) at %d/%d done", victim.Owner, l.Slot, l.Token, f.completed(), f.p.Items)
		f.res.SideEffectBound += f.p.Concurrency
		if err := f.watcher.WaitToken(ctx, l.Slot, l.Token); err != nil {
			return err
		}
		f.res.event("slot %d taken over with token %d after %s", l.Slot, f.watcher.Token(l.Slot), time.Since(stopped).Round(time.Millisecond))
		// The freeze lasts past the claim TTL: the frozen worker's claims are expired as well as
		// taken over by the new token.
		select {
		case <-time.After(time.Until(stopped.Add(claimTTL + time.Second))):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if err := victim.Signal(syscall.SIGCONT); err != nil {
			return err
		}
		f.res.event("SIGCONT %s after %s", victim.Owner, time.Since(stopped).Round(time.Millisecond))
		if _, err := victim.WaitLine(ctx, linesAtStop, func(x progress.Line) bool { return x.Event == "lease-lost" }); err != nil {
			f.res.fail("the resumed worker never reported its lease lost: %v", err)
		} else {
			f.res.event("%s reported its lease lost", victim.Owner)
		}
		return nil
	})
}

// Faults puts a fault-injecting proxy between the workers and DynamoDB: throttling, HTTP 500s,
// connection resets, lost and delayed responses, each on a FaultRate share of requests.
func Faults(ctx context.Context, env Env, p Params) *Result {
	p.defaults()
	rates := Rates{Faults: map[Fault]float64{}, Delay: 2500 * time.Millisecond}
	for _, k := range AllFaults {
		rates.Faults[k] = p.FaultRate
	}
	rates.Faults[FaultDelay] = p.FaultRate / 4 // each one holds a connection for seconds
	proxy, err := StartProxy(env.Endpoint, p.Seed, rates)
	if err != nil {
		r := &Result{Scenario: "faults", Seed: p.Seed}
		r.fail("%v", err)
		return r
	}
	defer proxy.Close()
	r := run(ctx, env, "faults", p, env.Endpoint, func(ctx context.Context, f *fixture) error {
		f.endpoint = proxy.URL()
		f.watch()
		extra := []string{"--claim-ttl", "5s", "--lease-ttl", "3s", "--heartbeat", "500ms"}
		if err := f.startFleet(ctx, extra...); err != nil {
			return err
		}
		if err := waitAll(ctx, f.procs, time.Until(deadlineOf(ctx))); err != nil {
			return err
		}
		f.res.Faults = proxy.Counts()
		f.res.SideEffectBound = proxy.Injected()
		f.res.event("%d of %d requests got a fault", proxy.Injected(), total(f.res.Faults))
		return nil
	})
	return r
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// batchInFlight is how many handled items a worker with --batch-claims may lose the completion of
// when it fails: its handlers running (concurrency) and the items waiting for a batched
// completion (worker's completion queue: max(concurrency, 25)), plus the batch being written (up
// to 25).
func batchInFlight(concurrency int) int { return concurrency + max(concurrency, 25) + 25 }
