// Package work is `dynapart work`, one worker: its flags (the worker settings' from
// worker.Settings, settings.go), the --exec handler (exec.go, its errors in exec_error.go;
// --exec-effects' output in effects*.go), progress (progress.go,
// progress_json.go), metrics and the worker's status page (metrics.go), --record (record.go),
// --dry-run (dryrun.go), the read bill of a continuous worker (readbill.go), signals (shutdown.go)
// and the flag named by a refused setting (mismatch.go).
package work

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// workFlags are the flags of `work`: the worker settings', and the CLI's own.
type workFlags struct {
	settingFlags
	exec, metricsAddr, progress, record string
	execTimeout                         time.Duration
	dryRun, execEffects                 bool
	changed                             func(flag string) bool // given on the command line or in the environment
}

// longHelp is work --help's description.
const longHelp = `Runs one worker of a group of --workers slots. It takes a free slot (or waits as a hot standby
until one is released or expires), reads the slot's share of --table, claims every item with a
conditional write, runs the handler, and completes the item with a write fenced on the claim.
Start as many processes as you like: the first N get slots, the rest stand by.

--workers sets N when the group is created. Leave it out to join an existing group at its current N
(exit 2 if the group does not exist yet); a --workers that differs from the group's N is refused
(exit 2: a typo must not resize a fleet). 'dynapart scale --group G --workers M' changes N while the
group runs: within one heartbeat the workers stop claiming, save their positions and go on under the
new plan (workers beyond the new N stand by). In segment mode the group's --segments scan segments
(fixed at creation, default at least 64) are shared out in contiguous blocks, so a resize moves
segments with their cursors and reads nothing again; the group can grow to that many slots.

The handler: with --exec CMD, CMD runs once per claimed item (through /bin/sh -c; CMD is yours,
an empty one is refused,
item data never reaches the command line). The item is on stdin as a JSON object (numbers with all
their digits, binary values and binary set members as base64 strings, sets as arrays); the
environment has DYNAPART_KEY (the key as JSON), DYNAPART_SLOT, DYNAPART_ATTEMPT, DYNAPART_TOKEN and
DYNAPART_IDEMPOTENCY_KEY (with --follow also DYNAPART_VERSION, the item's content version). Exit
0 completes the item; any other exit is a failed attempt whose
error is the tail of CMD's stderr (exit 65 dead-letters at once). Exit 126 or 127 (the shell
could not run CMD: not executable, not found) is not the item's failure: it stops the worker, the
attempts in flight given back, not counted, and the worker exits 2. CMD and its process group are
killed after --exec-timeout or, by default, shortly before its claim expires (--claim-ttl), and
the failed attempt's error says which; one still running when a stopping worker's
--drain-timeout has passed is killed too, its attempt not counted; a process CMD left running
holding its stderr (or, with --exec-effects, its stdout) is killed 5s after CMD exits. Failed attempts are retried
with backoff up to --max-attempts, then dead-lettered (see 'dynapart failed'). CMD's stdout
(without --exec-effects) is the worker's stdout (its stderr with --progress json, whose lines stdout carries). Once the reader
of the worker's stdout or stderr has exited (work ... | head -1), the next write to it (CMD's output
or the worker's own line) stops the worker as SIGTERM does, the attempts this interrupts not
counted, and it exits 1.
With --exec-effects, CMD's stdout is read as one JSON object of effects, committed with the item's
completion in one atomic write: exactly once, or not at all (empty output or {}: none; the
output of a CMD that exits other than 0 is not read, and nothing of it is applied):
  {"set": {"attr": VALUE, ...}, "add": {"attr": NUMBER, ...}, "remove": ["attr", ...],
   "writes": [{"put":    {"table": "T", "item": {...}, "if_absent": true}},
              {"update": {"table": "T", "key": {...}, "set": {...}, "add": {...}, "remove": [...]}},
              {"delete": {"table": "T", "key": {...}}}]}
Values are plain JSON and write its types only (string S, number N, true/false BOOL, null NULL,
array L, object M): a set or binary value read on stdin and echoed back changes its type (a set
becomes an L, a B an S of its base64 text). set/add/remove change the item itself (with the inline
ledger in the completion's own write).
Names are spelled as above, each once in an object and none empty (nor a key of an object in a
value), with values of the kinds shown (null is none),
each table a DynamoDB table name or ARN; the output is UTF-8, and no string escapes half a
surrogate pair (a lone \ud800). Other output fails the attempt permanently (the item is
dead-lettered: fix CMD, then 'dynapart redrive'), saying what is wrong and where (path, line and
column), and so does an effect on a key or ledger attribute, or a put if_absent of a row that
exists: nothing of the effects or the completion is applied. A value nested deeper than DynamoDB
stores (31 levels of arrays and objects) is such output, and so is output over 4 MB (its pipe is
closed at the limit, whatever CMD's exit). DynamoDB takes at most 4 KB of expressions per update
(150 attributes with short names changed in one update fit, 400 do not), 100 actions and 4 MB in
one commit; past those the commit is refused with DynamoDB's error, permanently too. The completion
is one of the 100 actions (with --ledger table a change of the item itself one more): more than 99
writes (98) are refused so before anything is sent, naming the write. A commit whose writes name a
table that does not exist (or that IAM denies) is no item's failure: it stops the pass as an outage
(see Outages), no attempt used, its claim given back; create the table and run again.
Without --exec the handler does nothing but complete the item (to try things out, benchmarks).
--complete-only skips the claim and completes each item with one conditional write.

--read-rate caps this worker's scan in RCU per second, --write-rate its ledger writes (claims,
completions, retries, dead letters, releases; not lease heartbeats or checkpoints) in WCU per
second, both settled on the capacity DynamoDB reports; --write-rate halves the rate allowed when
DynamoDB throttles and climbs back by a tenth a second (throttles show in progress and metrics).

--once processes the share one time, then takes any other free, unfinished slot the same way, and
exits 0 once every slot is finished or held by a live worker (one that renews its lease: a held
slot whose lease runs out, its worker dead, is taken over, so before it exits a --once worker
watches the held slots for about one heartbeat; one that cannot read the group for
--outage-timeout exits 1) (so one --once process can do the whole table; a standby exits 0 once
every slot is finished); otherwise the worker rescans every --poll-interval until stopped. A --once worker whose slot is finished, when no free unfinished slot
is left, steals: it takes scan units (segments, or shards) not yet started from slots still
working, a few at a time from the end of their share, so a skewed table ends close to a balanced one;
--no-steal turns that off (in a group of two or more slots the worker still marks each unit it
reads, one conditional write per unit per pass, so that other workers' stealing stays exclusive;
a one-slot group has no thief and writes no markers).
--follow (continuous, segment or filter mode) back-fills the share with one pass, then follows the
table's DynamoDB stream instead of scanning again (the table needs a stream with new and old
images: 'dynapart init --table T --stream' before the first pass; exit 2 without one). An item's
version is its content (every attribute but the ledger's): each version is handled once, by the
pass or from the stream, never one older than a version handled before; writes that change no
content and deleted items are not handled. The stream's shards are leased among the group's
workers and checkpointed; a dead reader's shards are taken over from their checkpoints. Every
changed item costs one consistent read (two with --ledger table) besides its claim and
completion. A stream that lost records after a checkpoint (older than its 24-hour retention)
makes the worker scan the whole table again for items whose content changed (logged).
--dry-run reads each slot's share exactly as a run would (same plan, mode and partition function)
and prints, per slot, how many items a run would process (those not done or failed per the
ledger), a few sample keys, the RCU the reads consumed and the WCU processing would cost if every
item succeeds at its first attempt (each write billed by the size of what it writes, the inline
ledger's state included, or the ledger table's row as stored; with --ledger table a refused claim
of each done or failed item; in --mode index the pending index's writes; approximate with
--transaction-batches; retries and effects not counted: with --exec-effects, a completion that
carries writes to other items is a transaction, 2 WCU per item it writes). Its total adds
the reads a run makes besides its scans: items read again after their claims with --versions,
ledger rows with --ledger table --complete-only or --transaction-batches. It takes no lease and
writes nothing; settings the run would be refused for (a --workers or group setting other than an
existing group's) exit 2 as they would for the run. With --once, on a group whose every slot is finished (a run of it processes
nothing: a finished once-group does not pass again), it says so first and that its figures are
what a run of a new group would process (--group with a new name, and --workers).

Outages: a slot holder whose passes fail (DynamoDB unreachable or throttled beyond the SDK's
retries, or refusing a ledger write or an effect commit for every item alike: AccessDenied, a
table gone or one an effect names that does not exist) keeps its
slot and retries from its checkpoint, 1s doubling up to 30s apart; after --outage-timeout (default
15m; negative: for ever) it exits 1 with the last error. A worker started during an outage retries
its start reads on the same terms; a standby waits through any outage.

A setting given as 0 or "" where that would mean its default (--max-attempts 0, --claim-ttl 0s,
--page-size 0 without --read-rate) is refused (exit 2): leave the flag out for the default. A zero
that is a setting of its own is taken: --read-rate 0 is unlimited (as when it is left out),
--exec-timeout 0 kills CMD only before its claim expires, --page-size 0 with --read-rate sizes
each page to the rate.

SIGTERM or SIGINT stop gracefully: no new claims, handlers in flight get --drain-timeout, the
claims left are released, the checkpoint saved and the slot released so a standby takes over at
once. A second signal kills the --exec commands running and exits 1 at once.

'dynapart pause --group G' makes the group's workers stop claiming within one heartbeat (they keep
their slots; the progress line says PAUSED); 'dynapart resume --group G' goes on from the
checkpoints.`

// New is `dynapart work`.
func New(g *cli.Globals) *cobra.Command {
	var f workFlags
	cmd := &cobra.Command{
		Use:   "work",
		Short: "Run one worker: take a slot, process its share, exactly once",
		Long:  longHelp,
		Example: `  dynapart work --table users --workers 4 --once
  dynapart work --table users --workers 4 --once --exec 'python3 send.py'
  dynapart work --table receipts --workers 8 --mode filter --partition-attr message_id
  dynapart work --table users --workers 4 --dry-run
  dynapart work --table users --once      # join the running group users/default at its N
  DYNAPART_TABLE=users DYNAPART_WORKERS=4 dynapart work --metrics-addr :9090`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runWork(cmd, g, &f) },
	}
	f.add(cmd.Flags())
	return cmd
}

// add defines the flags of `work`.
func (f *workFlags) add(fl *pflag.FlagSet) {
	f.settingFlags.add(fl)
	fl.StringVar(&f.exec, "exec", "", "command to run per item (item JSON on stdin, DYNAPART_* in the environment)")
	fl.DurationVar(&f.execTimeout, "exec-timeout", 0, "kill --exec after this long, if that comes before its claim's end (it is always killed shortly before its claim expires: --claim-ttl; 0, the default: that alone)")
	fl.BoolVar(&f.execEffects, "exec-effects", false, "read --exec's stdout as a JSON object of effects committed with the item's completion (see above)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics (/metrics) and the live status page (/, /api/status) on this address, e.g. :9090")
	fl.StringVar(&f.progress, "progress", "auto", "progress: auto (bar on a terminal, else a log line every 5s), bar (the slot held now: items done of one slot's share, ETA), log, json (a line every 250ms on stdout), none")
	fl.StringVar(&f.record, "record", "", "append the key of every item this worker completes to this file (for audits and the demo)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "read each slot's share as a run would and print, per slot, the items to process, sample keys and estimated RCU/WCU; no lease, no writes (with --once on a finished group: says a run processes nothing, figures for a new --group)")
}

// check is what only the CLI can tell about its flags; worker.New checks the settings themselves.
func (f *workFlags) check() error {
	switch f.progress {
	case "auto", "bar", "log", "json", "none":
	default:
		return cli.Usagef("--progress %q: want auto, bar, log, json or none", f.progress)
	}
	if f.changed("write-rate") && !(f.cfg.WriteRate > 0 && !math.IsInf(f.cfg.WriteRate, 1)) {
		return cli.Usagef("--write-rate must be a number > 0 (WCU per second; leave it out for no limit), got %v", f.cfg.WriteRate)
	}
	if f.changed("outage-timeout") && f.cfg.OutageTimeout == 0 {
		return cli.Usagef("--outage-timeout 0: give a duration > 0, or a negative one to retry for ever (leave it out for the default, %v)", worker.DefaultOutageTimeout)
	}
	if f.changed("exec") && strings.TrimSpace(f.exec) == "" {
		// --exec "$CMD" with CMD unset would otherwise mark every item done without running anything.
		return cli.Usagef("--exec is empty: give the command to run per item (leave --exec out to mark items done with no handler)")
	}
	if f.execTimeout < 0 {
		return cli.Usagef("--exec-timeout must not be negative (0, the default, kills CMD shortly before its claim expires), got %v", f.execTimeout)
	}
	if f.execEffects && f.exec == "" {
		return cli.Usagef("--exec-effects reads the output of --exec: give --exec CMD")
	}
	if f.cfg.NoSteal && !f.cfg.Once {
		return cli.Usagef("--no-steal applies to --once workers only (continuous workers never steal)")
	}
	return f.settingFlags.check(f.changed)
}

// config is the worker.Config of the flags (without Logger and Hooks).
func (f *workFlags) config(db *dynamodb.Client) worker.Config {
	cfg := f.cfg
	cfg.Client = db
	return cfg
}

// runWork checks the flags (worker.New validates the settings, before any DynamoDB call), then runs
// the worker or, with --dry-run, the dry run.
func runWork(cmd *cobra.Command, g *cli.Globals, f *workFlags) error {
	f.changed = cmd.Flags().Changed
	if err := f.check(); err != nil {
		return err
	}
	ctx := cmd.Context()
	if f.cfg.Follow {
		sc, err := g.StreamsClient(ctx)
		if err != nil {
			return err
		}
		f.cfg.Streams = sc
	}
	db, err := g.DynamoClient(ctx)
	if err != nil {
		return err
	}
	if f.dryRun {
		w, err := worker.New(f.config(db))
		if err != nil {
			return explainSetting(err)
		}
		plan, err := w.Plan(ctx)
		if err != nil {
			return explainSetting(err)
		}
		return runDryRun(ctx, g, f, plan, w.Config().Group, cmd.OutOrStdout())
	}
	log, line, err := g.Logger()
	if err != nil {
		return err
	}
	r := &workRun{g: g, f: f, db: db, log: log, line: line, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr()}
	if err := r.newWorker(); err != nil {
		return err
	}
	defer r.rec.Close()
	return r.run(ctx)
}

// workRun is one run of `dynapart work`: its flags, outputs, worker and what watches it.
type workRun struct {
	g              *cli.Globals
	f              *workFlags
	db             *dynamodb.Client
	log            *slog.Logger
	line           *cli.StatusLine
	stdout, stderr io.Writer
	w              *worker.Worker
	plan           scan.Plan     // the group's plan when the worker starts (for estimates)
	metrics        *metrics      // nil without --metrics-addr
	json           *jsonProgress // nil unless --progress json
	rec            *recorder     // nil without --record
}

// newWorker makes the worker with the hooks of --metrics-addr, --progress json and --record.
func (r *workRun) newWorker() error {
	var hooks []worker.Hooks
	if r.f.metricsAddr != "" {
		r.metrics = newMetrics(func() worker.Stats { return r.w.Stats() })
		hooks = append(hooks, r.metrics.hooks())
	}
	if r.f.progress == "json" {
		r.json = &jsonProgress{out: r.stdout}
		hooks = append(hooks, r.json.hooks())
	}
	if r.f.record != "" {
		r.rec = &recorder{}
		hooks = append(hooks, r.rec.hooks())
	}
	cfg := r.f.config(r.db)
	cfg.Logger, cfg.Hooks = r.log, chainHooks(hooks...)
	w, err := worker.New(cfg)
	if err != nil {
		return explainSetting(err)
	}
	r.w = w
	if r.json != nil {
		r.json.w = w
	}
	if r.rec != nil {
		return r.rec.open(r.f.record)
	}
	return nil
}

// run runs the worker until it is done or stopped by a signal, then logs its stats.
func (r *workRun) run(parent context.Context) error {
	ctx, stopSignals := onSignals(parent, r.log, r.stderr)
	defer stopSignals()
	ctx, stopRun := context.WithCancelCause(ctx) // stopRun(errOutputClosed, a *notRunnableError): outclosed.go, notrunnable.go
	defer stopRun(nil)
	defer watchOutput(stopRun, r.stdout, r.stderr)()
	if r.metrics != nil {
		stopMetrics, err := r.serveMetrics(ctx)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	// Without --workers the worker joins the group at its n: read it for the estimates below (and
	// exit 2 at once when the group does not exist). During an outage of DynamoDB the worker
	// starts without them: Run waits through it (Config.OutageTimeout).
	r.plan.Slots = r.f.cfg.Workers
	if r.f.cfg.Workers == 0 {
		plan, err := r.w.Plan(ctx)
		switch {
		case err == nil:
			r.plan = plan
		case lock.Retryable(err) && ctx.Err() == nil:
			r.log.Warn("dynapart: could not read the group; starting without its size, waiting for DynamoDB", "err", err)
		default:
			return explainSetting(err)
		}
	}
	handler := func(context.Context, worker.Item) error { return nil }
	switch {
	case r.f.exec != "" && r.f.execEffects:
		handler = execEffectsHandler(r.f.exec, r.f.execTimeout, stopRun)
	case r.f.exec != "":
		handler = execHandler(r.f.exec, r.f.execTimeout, r.execOut(), stopRun)
	}
	if r.w.Config().Mode == scan.ModeIndex {
		warnEmptyIndex(ctx, r.log, r.db, r.w.Config())
	}
	if !r.f.cfg.Once {
		warnReadBill(ctx, r.log, r.db, r.f.cfg.Table, readBill{Mode: r.w.Config().Mode, Workers: r.plan.Slots,
			Consistent: r.f.cfg.ConsistentRead, PollInterval: r.w.Config().PollInterval})
	}
	show := progressView{mode: r.f.progress, stats: r.w.Stats, estimate: func() int64 { return estimateShare(ctx, r.db, r.f.cfg.Table, r.plan.Slots) },
		log: r.log, line: r.line, stderr: r.stderr, json: r.json}
	stopProgress := show.start()
	start := time.Now()
	runErr := explainSetting(r.w.Run(ctx, handler))
	stopProgress()
	if !cli.IsUsage(runErr) { // a setting refused at the start: nothing ran, no stats to tell
		r.logDone(time.Since(start))
	}
	if r.json != nil {
		r.json.print("exit", true)
	}
	switch {
	case runErr == nil:
		return nil // every item handled: an output closed at the end stops nothing
	case errors.Is(context.Cause(ctx), errOutputClosed):
		return outputClosedError(runErr)
	case errors.As(context.Cause(ctx), new(*notRunnableError)):
		return notRunnableExit(context.Cause(ctx))
	case errors.Is(context.Cause(ctx), errSignal):
		r.log.Info("dynapart: stopped by signal; claims and slot released")
		return nil
	default:
		return runErr
	}
}

// outputClosedError is the error of a run stopped by errOutputClosed; runErr is Run's own error,
// told too unless it is the stop's cancellation.
func outputClosedError(runErr error) error {
	msg := "stopped: " + errOutputClosed.Error() + "; the attempts in flight were given back, not counted"
	if !errors.Is(runErr, context.Canceled) {
		return fmt.Errorf("%s; the run also ended with: %v", msg, runErr) // exit 1, as the stop
	}
	return errors.New(msg)
}

// execOut is where --exec's stdout goes without --exec-effects: the worker's stdout, unless
// --progress json writes its lines there (then stderr, so that they stay one JSON value a line).
func (r *workRun) execOut() io.Writer {
	if r.f.progress == "json" {
		return r.stderr
	}
	return r.stdout
}

// serveMetrics serves --metrics-addr (metrics and the status page) until the returned function.
func (r *workRun) serveMetrics(ctx context.Context) (func(), error) {
	page, err := status.WorkerPage(r.g, r.f.ledgerFlags(), r.w)
	if err != nil {
		return nil, err
	}
	r.metrics.mount = page.Mount
	stopServing, err := r.metrics.serve(ctx, r.f.metricsAddr)
	if err != nil {
		return nil, err
	}
	pctx, stopPage := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		page.Run(pctx) // samples only while someone watches
	}()
	return func() {
		stopServing()
		stopPage()
		<-sampled
	}, nil
}

// logDone logs the worker's stats at the end of the run.
func (r *workRun) logDone(took time.Duration) {
	st := r.w.Stats()
	r.log.Info("dynapart: worker done", "owner", r.w.Config().Owner, "completed", st.Completed, "retried", st.Retried,
		"dead_lettered", st.DeadLettered, "skipped", st.Skipped, "released", st.Released, "takeovers", st.Takeovers,
		"unprocessable", st.Unprocessable, "abandoned", st.Abandoned, "rcu", st.RCU, "wcu", st.WCU,
		"write_throttles", st.WriteThrottles, "seconds", took.Seconds())
	if st.DeadLettered > 0 {
		r.log.Warn(fmt.Sprintf("dynapart: %s dead-lettered by this worker: 'dynapart failed %s' lists them with their errors, "+
			"'dynapart redrive %[2]s' gives them back to be handled again", cli.Count(st.DeadLettered, "item"), r.ledgerArgs()))
	}
}

// ledgerArgs are the flags that name the worker's ledger to failed and redrive.
func (r *workRun) ledgerArgs() string {
	c := r.w.Config()
	args := "--table " + c.Table
	if c.Ledger == worker.LedgerTable {
		args += " --ledger table --ledger-table " + c.LedgerTable + " --job " + c.Job
	} else if c.AttrPrefix != worker.DefaultAttrPrefix {
		args += " --attr-prefix " + c.AttrPrefix
	}
	return args
}

// estimateShare is the table's item count / N (DescribeTable's count, approximate on AWS), or 0.
func estimateShare(ctx context.Context, db *dynamodb.Client, table string, n int) int64 {
	if n <= 0 {
		return 0 // the group's size is unknown (not read at start)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := cli.Describe(cctx, db, table)
	if err != nil || t == nil || t.ItemCount == nil {
		return 0
	}
	return *t.ItemCount / int64(n)
}

// ledgerFlags are the flags of the ledger the worker uses, for reading it.
func (f *workFlags) ledgerFlags() cli.LedgerFlags {
	return cli.LedgerFlags{Table: f.cfg.Table, Job: f.cfg.Job, Kind: string(f.cfg.Ledger), LedgerTable: f.cfg.LedgerTable, Prefix: f.cfg.AttrPrefix}
}
