package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/internal/progress"
	"github.com/dynapart/dynapart/ledger"
)

// Follow is the follow scenario with the inline ledger: `dynapart work --follow` processes (Slots
// slot holders + Standbys) back-fill a table whose stream is on while a writer keeps changing it
// (follow_writer.go: updates, several in quick succession, rewrites of the same value, deletes,
// inserts), during the back-fill and after it. Kills times the slot holder that reads a stream
// shard is SIGKILLed and a replacement joins; then a slot holder is frozen with SIGSTOP past its
// lease (until its slot is taken over) and resumed. The writer stops 3s later; once every live
// item's latest value is handled and recorded done (or followSettle has passed), the workers get
// SIGTERM and followAudit checks every handler run (the --exec log: key, value, version, worker,
// lease, start) and every completion (the ledger's stream) against the writer's history and the
// table.
func Follow(ctx context.Context, env Env, p Params) *Result {
	return followScenario(ctx, env, p, "inline")
}

// FollowTableLedger is Follow with the table ledger (--ledger table): the workers read each
// changed item and its ledger row, and the stream's images carry no state.
func FollowTableLedger(ctx context.Context, env Env, p Params) *Result {
	return followScenario(ctx, env, p, "table")
}

// The follow scenario's timings. Leases of 8s (heartbeat 1s) and claims of 15s, with up to 50
// attempts an item (the handler never fails): on a machine the rest of the suite loads, DynamoDB
// Local can take seconds to answer, a lease lost by load restarts its slot's pass, and a claim that
// lands after its handler's deadline costs an attempt; the scenario is about versions, not about
// dead letters. A stream read every 200ms, a writer operation every 10ms, followWait of writes for
// a slot holder to follow the stream before the writer is held (see following), 3s of writes
// after the last fault, and up to followSettle for the fleet to catch up afterwards.
const (
	followLeaseTTL = 8 * time.Second
	followClaimTTL = 15 * time.Second
	followPace     = 10 * time.Millisecond
	followTail     = 3 * time.Second
	followWait     = 20 * time.Second
	followSettle   = 2 * time.Minute
)

// follower is one run of the follow scenario.
type follower struct {
	f           *fixture
	kind        string // the ledger: inline or table
	ledgerTable string
	runs        *runLog
	w           *followWriter
	faults      []followFault
	completions ledgerStream // where the completions are read from at the end
}

func followScenario(ctx context.Context, env Env, p Params, kind string) *Result {
	p.defaults()
	name := "follow"
	if kind == "table" {
		name = "follow-table"
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	f, err := newFixture(ctx, env, name, p, env.Endpoint)
	if err != nil {
		r := &Result{Scenario: name, Seed: p.Seed, Params: p}
		r.fail("setup: %v", err)
		return r
	}
	env.logf("chaos: %s seed %d: %d items, %d slots + %d standby, table %s", name, p.Seed, p.Items, p.Slots, p.Standbys, f.table)
	s := &follower{f: f, kind: kind, runs: &runLog{path: filepath.Join(f.dir, "runs.log")}}
	start := time.Now()
	if err := s.body(ctx); err != nil {
		f.res.fail("%s: %v", name, err)
	}
	r := s.finish(ctx, start)
	s.cleanup(!r.OK())
	env.logf("chaos: %s", r.Summary())
	return r
}

func (s *follower) body(ctx context.Context) error {
	f := s.f
	initArgs := []string{"init", "--table", f.table, "--key", "id:S", "--lease-table", f.leases, "--stream"}
	if s.kind == "table" {
		s.ledgerTable = f.table + "-ledger"
		initArgs = append(initArgs, "--ledger-table", s.ledgerTable)
	}
	if err := f.cli(ctx, initArgs...); err != nil {
		return err
	}
	// The completions are read from the stream of the table that holds the ledger: the source
	// table's, on already, or the ledger table's, turned on before the workers start.
	rows := f.table
	s.completions = ledgerStream{prefix: "dp_"}
	if s.kind == "table" {
		rows, s.completions = s.ledgerTable, ledgerStream{table: true}
	}
	arn, _, err := follow.EnableStream(ctx, f.db, rows)
	if err != nil {
		return err
	}
	s.completions.arn = arn
	f.watch()
	f.countLeaseLosses(f.p.Concurrency)
	s.w = newFollowWriter(f.db, f.table, f.p.Items, f.p.Seed, followPace)
	s.w.start(ctx)
	f.res.event("%d items seeded, stream on; %d slots + %d standby (work --follow, %s ledger, concurrency %d); the writer changes the table from the start, an operation every %s",
		f.p.Items, f.p.Slots, f.p.Standbys, s.kind, f.p.Concurrency, followPace)
	if err := s.startFleet(ctx); err != nil {
		return err
	}
	if err := s.backfilled(ctx, 5*time.Minute); err != nil {
		return err
	}
	f.res.event("every slot holder completed its first pass %s after the start, the writer at %d writes",
		time.Since(s.w.hist.started).Round(time.Millisecond), s.w.writes.Load())
	for range f.p.Kills {
		if err := s.kill(ctx); err != nil {
			return err
		}
	}
	if err := s.freeze(ctx); err != nil {
		return err
	}
	select {
	case <-time.After(followTail):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	hist, err := s.w.Stop()
	if err != nil {
		return err
	}
	f.res.event("the writer stopped after %s: %d writes (%s), %d items live",
		hist.stopped.Sub(hist.started).Round(time.Millisecond), hist.writes, describeCounts(hist.counts), hist.live())
	return s.converge(ctx, hist)
}

// args are a worker's flags: the scenarios' common ones, continuous (no --once) and following.
func (s *follower) args(owner string) []string {
	extra := []string{"--follow", "--stream-poll", "200ms", "--lease-ttl", followLeaseTTL.String(), "--heartbeat", "1s",
		"--claim-ttl", followClaimTTL.String(), "--max-attempts", "50", "--drain-timeout", "5s", "--exec", s.handler(owner)}
	if s.kind == "table" {
		extra = append(extra, "--ledger", "table", "--ledger-table", s.ledgerTable)
	}
	var out []string
	for _, a := range s.f.workArgs(extra...) {
		if a != "--once" {
			out = append(out, a)
		}
	}
	return out
}

// handler is the --exec command of worker owner: a line per run in the handler log, written as
// the run starts (key, value of n, DYNAPART_VERSION, owner, slot, token, start time).
func (s *follower) handler(owner string) string {
	return fmt.Sprintf(`t=$(date +%%s.%%N); v=$(sed -n 's/.*"n":\([0-9]*\).*/\1/p'); `+
		`printf '%%s %%s %%s %%s %%s %%s %%s\n' "$DYNAPART_KEY" "$v" "$DYNAPART_VERSION" '%s' "$DYNAPART_SLOT" "$DYNAPART_TOKEN" "$t" >> '%s'`,
		owner, s.runs.path)
}

// start starts one more worker.
func (s *follower) start() (*Proc, error) {
	f := s.f
	owner := fmt.Sprintf("w%d", f.n)
	f.n++
	p, err := StartWorker(f.env.Bin, f.dir, owner, f.notify, cliEnv(), s.args(owner)...)
	if err != nil {
		return nil, err
	}
	f.procs = append(f.procs, p)
	return p, nil
}

// startFleet starts the slot holders one by one (each waits for its lease), then the standbys.
func (s *follower) startFleet(ctx context.Context) error {
	for range s.f.p.Slots {
		p, err := s.start()
		if err != nil {
			return err
		}
		if _, err := p.WaitLine(ctx, 0, func(l progress.Line) bool { return l.Event == "lease-acquired" }); err != nil {
			return fmt.Errorf("%w\n%s", err, p.LogTail(2000))
		}
	}
	for range s.f.p.Standbys {
		if _, err := s.start(); err != nil {
			return err
		}
	}
	return nil
}

// readsShard reports whether the worker's log says it reads a stream shard now: its last
// "reading shard" line comes after its last line that gives a shard up.
func readsShard(p *Proc) bool {
	b, _ := os.ReadFile(p.Log)
	reading := bytes.LastIndex(b, []byte("follow: reading shard"))
	if reading < 0 {
		return false
	}
	for _, gone := range []string{"follow: released shard", "follow: shard lease lost", "follow: shard lease was lost", "follow: shard read to its end"} {
		if bytes.LastIndex(b, []byte(gone)) > reading {
			return false
		}
	}
	return true
}

// shardReader waits for a live slot holder that reads a stream shard (it back-filled its share
// and follows the stream) and returns it; nil after timeout.
func (s *follower) shardReader(ctx context.Context, timeout time.Duration) (*Proc, error) {
	deadline := time.After(timeout)
	for {
		for _, p := range s.f.holders() {
			if readsShard(p) {
				return p, nil
			}
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// pause waits a random time between lo and hi while the writer goes on.
func (s *follower) pause(ctx context.Context, lo, hi time.Duration) error {
	select {
	case <-time.After(lo + time.Duration(s.f.rng.Int64N(int64(hi-lo)))):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// backfilled waits until every live slot holder has completed a pass of its share (at most
// timeout).
func (s *follower) backfilled(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		all := true
		for _, p := range s.f.holders() {
			b, _ := os.ReadFile(p.Log)
			all = all && bytes.Contains(b, []byte("dynapart: pass complete"))
		}
		if all {
			return nil
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			s.f.res.event("the back-fill's first passes did not all complete within %s", timeout)
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// following returns a slot holder that reads a stream shard. A slot follows the stream only
// after a clean pass of its share, and while the table changes its passes may stay dirty (an item
// deleted, or claimed by a follower of the stream, between the scan and the claim asks for
// another pass): when no holder reads a shard within followWait of writes, the writer is held
// until one does (at most two minutes), and resumed.
func (s *follower) following(ctx context.Context) (*Proc, error) {
	p, err := s.shardReader(ctx, followWait)
	if err != nil || p != nil {
		return p, err
	}
	s.w.Hold(true)
	held := time.Now()
	p, err = s.shardReader(ctx, 2*time.Minute)
	s.w.Hold(false)
	s.f.res.event("no slot holder followed the stream after %s of writes (their passes stayed dirty): the writer held for %s, until one did: %v",
		followWait, time.Since(held).Round(time.Millisecond), p != nil)
	return p, err
}

// kill SIGKILLs the slot holder that reads a stream shard (any slot holder when none does), starts
// a replacement and waits for the slot's takeover.
func (s *follower) kill(ctx context.Context) error {
	f := s.f
	victim, err := s.following(ctx)
	if err != nil {
		return err
	}
	reader := victim != nil
	if victim == nil {
		f.res.event("no worker was seen reading a stream shard")
		if victim, _, err = f.pickHolder(ctx); err != nil || victim == nil {
			return err
		}
	}
	if err := s.pause(ctx, 300*time.Millisecond, 2*time.Second); err != nil {
		return err
	}
	l := victim.Last()
	victim.Kill()
	s.faults = append(s.faults, followFault{kind: "SIGKILL", owner: victim.Owner, lease: [2]int64{int64(l.Slot), l.Token}})
	f.res.SideEffectBound += f.p.Concurrency // the handlers it had running
	f.res.event("SIGKILL %s (slot %d, token %d; reading a stream shard: %v) at %d handler runs, the writer at %d writes",
		victim.Owner, l.Slot, l.Token, reader, s.runCount(), s.w.writes.Load())
	killed := time.Now()
	if _, err := s.start(); err != nil {
		return err
	}
	if l.Slot < 0 {
		return nil
	}
	if err := f.watcher.WaitToken(ctx, l.Slot, l.Token); err != nil {
		return err
	}
	f.res.event("slot %d taken over with token %d after %s", l.Slot, f.watcher.Token(l.Slot), time.Since(killed).Round(time.Millisecond))
	return nil
}

// freeze SIGSTOPs a random slot holder until a standby has taken its slot over and 0.5-1.5s more,
// then SIGCONTs it: it must report its lease lost.
func (s *follower) freeze(ctx context.Context) error {
	f := s.f
	if err := s.pause(ctx, time.Second, 3*time.Second); err != nil {
		return err
	}
	victim, l, err := f.pickHolder(ctx)
	if err != nil || victim == nil {
		return err
	}
	reader := readsShard(victim)
	victim.Fault()
	if err := victim.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stopped := time.Now()
	linesAtStop := len(victim.Lines())
	f.res.SideEffectBound += f.p.Concurrency
	f.res.event("SIGSTOP %s (slot %d, token %d; reading a stream shard: %v) at %d handler runs, the writer at %d writes",
		victim.Owner, l.Slot, l.Token, reader, s.runCount(), s.w.writes.Load())
	if err := f.watcher.WaitToken(ctx, l.Slot, l.Token); err != nil {
		return err
	}
	f.res.event("slot %d taken over with token %d after %s", l.Slot, f.watcher.Token(l.Slot), time.Since(stopped).Round(time.Millisecond))
	// Past its lease: the new holder takes the frozen worker's claims over at once (its token is
	// newer), so the freeze need not outlast the claims.
	if err := s.pause(ctx, 500*time.Millisecond, 1500*time.Millisecond); err != nil {
		return err
	}
	if err := victim.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	s.faults = append(s.faults, followFault{kind: "SIGSTOP", owner: victim.Owner, lease: [2]int64{int64(l.Slot), l.Token}})
	f.res.event("SIGCONT %s after %s", victim.Owner, time.Since(stopped).Round(time.Millisecond))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := victim.WaitLine(wctx, linesAtStop, func(x progress.Line) bool { return x.Event == "lease-lost" }); err != nil {
		f.res.fail("the resumed worker never reported its lease lost: %v", err)
	} else {
		f.res.event("%s reported its lease lost", victim.Owner)
	}
	return nil
}

// runCount is the handler runs logged so far.
func (s *follower) runCount() int {
	_ = s.runs.read()
	return len(s.runs.runs)
}

// converge waits until every live item's latest value has been handled and the ledger records
// every live item done at the version of its content, or followSettle has passed.
func (s *follower) converge(ctx context.Context, hist *followHistory) error {
	deadline := time.Now().Add(followSettle)
	for {
		if err := s.runs.read(); err != nil {
			return err
		}
		left := unhandledLatest(hist, s.runs.runs)
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			s.f.res.event("%d live items' latest values still unhandled %s after the writer stopped", left, followSettle)
			return nil
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	handled := time.Since(hist.stopped)
	lg, err := s.ledger()
	if err != nil {
		return err
	}
	for {
		final, err := readFinal(ctx, s.f.db, s.f.table, lg)
		if err != nil {
			return err
		}
		left := 0
		for k, it := range hist.items {
			fi, ok := final[k]
			if it.deleted.IsZero() && (!ok || fi.st.Status != ledger.StatusDone || fi.st.Version != fi.version) {
				left++
			}
		}
		if left == 0 {
			s.f.res.event("every live item's latest value handled %s after the writer stopped, and recorded done at its version after %s",
				handled.Round(time.Millisecond), time.Since(hist.stopped).Round(time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			s.f.res.event("%d live items not recorded done at their content's version %s after the writer stopped", left, followSettle)
			return nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// unhandledLatest counts the live items whose latest value has no handler run.
func unhandledLatest(hist *followHistory, runs []handlerRun) int {
	handled := make(map[string]map[int64]bool, len(hist.items))
	for _, r := range runs {
		if handled[r.key] == nil {
			handled[r.key] = map[int64]bool{}
		}
		handled[r.key][r.value] = true
	}
	left := 0
	for k, it := range hist.items {
		if it.deleted.IsZero() && !handled[k][it.latest()] {
			left++
		}
	}
	return left
}

// ledger is the scenario's ledger, to read the items' states and content versions.
func (s *follower) ledger() (ledger.Ledger, error) {
	if s.kind == "table" {
		return ledger.NewTable(s.f.db, s.ledgerTable, "default", s.f.table, []string{"id"}, ledger.WithVersions())
	}
	return ledger.NewInline(s.f.db, s.f.table, []string{"id"}, ledger.WithVersions())
}

// finish stops the workers (SIGTERM: every one left must exit 0), the writer and the lease
// watcher, and audits the run.
func (s *follower) finish(ctx context.Context, start time.Time) *Result {
	f, r := s.f, s.f.res
	for _, p := range f.procs {
		if p.Alive() {
			_ = p.Signal(syscall.SIGCONT)
			_ = p.Signal(syscall.SIGTERM)
		}
	}
	if err := waitAll(ctx, f.procs, 30*time.Second); err != nil {
		r.fail("after SIGTERM: %v", err)
	}
	r.Wall = time.Since(start)
	for _, p := range f.procs {
		p.Stop()
		if !p.Killed() && p.ExitCode() != 0 {
			r.fail("worker %s exited with %d: %s", p.Owner, p.ExitCode(), lastLines(p.LogTail(4000), 6))
		}
	}
	s.passEvent()
	var hist *followHistory
	if s.w != nil {
		var err error
		if hist, err = s.w.Stop(); err != nil {
			r.fail("%v", err)
		}
	}
	if f.watcher != nil {
		f.watcher.Stop()
	}
	if hist == nil {
		return r
	}
	a := &followAudit{hist: hist, faults: s.faults, lost: f.leasesLostByLoad(r), records: map[string]int{}}
	if f.watcher != nil {
		r.Leases = f.watcher.Report()
		a.owners = r.Leases.Owners
		r.Takeovers = r.Leases.Takeovers
		for _, v := range r.Leases.Violations {
			r.fail("lease history: %s", v)
		}
	}
	if err := s.runs.read(); err != nil {
		r.fail("%v", err)
	}
	a.runs, a.bad = s.runs.runs, s.runs.bad
	if s.completions.arn == "" {
		r.fail("no stream to read the completions from")
		return r
	}
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer ccancel()
	comps, records, err := s.completions.completions(cctx, f.env.Streams(f.direct))
	if err != nil {
		r.fail("read the completions from the ledger's stream: %v", err)
		return r
	}
	a.completions = comps
	r.event("the ledger's stream: %d records read", records)
	for _, p := range f.procs {
		if err := readLines(p.Record, a.records); err != nil {
			r.fail("%v", err)
		}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	lg, err := s.ledger()
	if err == nil {
		a.final, err = readFinal(actx, f.db, f.table, lg)
	}
	if err != nil {
		r.fail("%v", err)
		return r
	}
	a.apply(r)
	return r
}

// passEvent reports the workers' passes, dirty (another pass needed) and clean, and when the first
// of them started to follow the stream, from their logs.
func (s *follower) passEvent() {
	dirty, clean := 0, 0
	var first time.Time
	for _, p := range s.f.procs {
		b, _ := os.ReadFile(p.Log)
		dirty += bytes.Count(b, []byte(`"again":true`))
		clean += bytes.Count(b, []byte(`"again":false`))
		for _, line := range bytes.Split(b, []byte("\n")) {
			if !bytes.Contains(line, []byte("follow: reading shard")) {
				continue
			}
			var l struct{ Time time.Time }
			if json.Unmarshal(line, &l) == nil && (first.IsZero() || l.Time.Before(first)) {
				first = l.Time
			}
			break
		}
	}
	following := "never"
	if !first.IsZero() && s.w != nil {
		following = first.Sub(s.w.hist.started).Round(time.Millisecond).String() + " after the writer started"
	}
	s.f.res.event("passes of the share: %d dirty (another pass needed), %d clean; the first worker read the stream %s", dirty, clean, following)
}

// cleanup deletes the tables (after a successful run; a failed one keeps them for a look).
func (s *follower) cleanup(keep bool) {
	s.f.cleanup(keep)
	if keep || s.ledgerTable == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _ = s.f.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(s.ledgerTable)})
}

// describeCounts renders the writer's operations by kind, in a fixed order.
func describeCounts(m map[string]int) string {
	var b bytes.Buffer
	for _, k := range []string{"update", "burst", "rewrite", "delete", "insert", "insert+update"} {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	return b.String()
}
