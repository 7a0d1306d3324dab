package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/internal/progress"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

type workFlags struct {
	table, group, mode, partitionAttr, job, ledger, ledgerTable, leaseTable, prefix              string
	exec, metricsAddr, owner, progress, record, indexName, shardAttr                             string
	workers, subSegments, concurrency, maxAttempts, shards, pageSize                             int
	leaseTTL, heartbeat, claimTTL, pollInterval, drainTimeout, execTimeout, standbyPoll, maxSkew time.Duration
	retryBackoff                                                                                 time.Duration
	once, completeOnly, batchClaims, consistent, dryRun                                          bool
	readRate, writeRate                                                                          float64
}

func newWorkCmd(g *globals) *cobra.Command {
	var f workFlags
	cmd := &cobra.Command{
		Use:   "work",
		Short: "Run one worker: take a slot, process its share, exactly once",
		Long: `Runs one worker of a group of --workers slots. It takes a free slot (or waits as a hot standby
until one is released or expires), reads the slot's share of --table, claims every item with a
conditional write, runs the handler, and completes the item with a write fenced on the claim.
Start as many processes as you like: the first N get slots, the rest stand by.

The handler: with --exec CMD, CMD runs once per claimed item (through /bin/sh -c; CMD is yours,
item data never reaches the command line). The item is on stdin as a JSON object; the
environment has DYNAPART_KEY (the key as JSON), DYNAPART_SLOT, DYNAPART_ATTEMPT, DYNAPART_TOKEN and
DYNAPART_IDEMPOTENCY_KEY. Exit 0 completes the item; any other exit is a failed attempt whose
error is the tail of CMD's stderr (exit 65 dead-letters at once). Failed attempts are retried
with backoff up to --max-attempts, then dead-lettered (see 'dynapart failed').
Without --exec the handler does nothing but complete the item (to try things out, benchmarks).
--complete-only skips the claim and completes each item with one conditional write.

--read-rate caps this worker's scan in RCU per second, --write-rate its ledger writes (claims,
completions, retries, dead letters, releases; not lease heartbeats or checkpoints) in WCU per
second, both settled on the capacity DynamoDB reports; --write-rate halves the rate allowed when
DynamoDB throttles and climbs back by a tenth a second (throttles show in progress and metrics).

--once processes the share one time and exits 0 when it is done (a standby exits 0 once every
slot is finished); otherwise the worker rescans every --poll-interval until stopped.
--dry-run reads each slot's share exactly as a run would (same plan, mode and partition function)
and prints, per slot, how many items a run would process (those not done or failed per the
ledger), a few sample keys, the RCU the reads consumed and the WCU processing would cost; it takes
no lease and writes nothing.

SIGTERM or SIGINT stop gracefully: no new claims, handlers in flight get --drain-timeout, the
claims left are released, the checkpoint saved and the slot released so a standby takes over at
once. A second signal exits at once.`,
		Example: `  dynapart work --table users --workers 4 --once
  dynapart work --table users --workers 4 --once --exec 'python3 send.py'
  dynapart work --table receipts --workers 8 --mode filter --partition-attr message_id
  dynapart work --table users --workers 4 --dry-run
  DYNAPART_TABLE=users DYNAPART_WORKERS=4 dynapart work --metrics-addr :9090`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runWork(cmd, g, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.table, "table", "", "source table (required)")
	fl.StringVar(&f.group, "group", "", "lease group the workers share (default TABLE/JOB)")
	fl.IntVar(&f.workers, "workers", 0, "number of slots N (required; extra workers stand by)")
	fl.StringVar(&f.mode, "mode", "segment", "how a slot finds its share: segment (parallel scan), filter (partition function), index (pending index)")
	fl.StringVar(&f.partitionAttr, "partition-attr", "", "filter mode: attribute to partition by (default the table's partition key)")
	fl.IntVar(&f.subSegments, "sub-segments", 4, "scan segments per slot, read in parallel")
	fl.IntVar(&f.pageSize, "page-size", 1000, "items per scan request; smaller pages checkpoint more often")
	fl.IntVar(&f.concurrency, "concurrency", 16, "handlers in flight")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 10*time.Second, "slot lease time to live; a dead worker's slot is taken over after it")
	fl.DurationVar(&f.heartbeat, "heartbeat", 0, "lease renewal interval (default lease-ttl/3)")
	fl.DurationVar(&f.standbyPoll, "standby-poll", time.Second, "how often a standby looks for a free slot (jittered)")
	fl.DurationVar(&f.maxSkew, "max-clock-skew", time.Second, "clock difference tolerated between workers (added to the wait before a takeover)")
	fl.DurationVar(&f.claimTTL, "claim-ttl", time.Minute, "how long a claim protects an item (handler time limit)")
	fl.BoolVar(&f.once, "once", false, "process the share once and exit (default: continuous)")
	fl.DurationVar(&f.pollInterval, "poll-interval", 0, "pause between passes (default 30s continuous, 5s once)")
	fl.StringVar(&f.job, "job", "default", "job name; with --ledger table a new job processes every item again")
	fl.StringVar(&f.ledger, "ledger", "inline", "where item state lives: inline (attributes on the item) or table (a ledger table)")
	fl.StringVar(&f.ledgerTable, "ledger-table", worker.DefaultLedgerTable, "ledger table for --ledger table")
	fl.StringVar(&f.leaseTable, "lease-table", worker.DefaultLeaseTable, "lease table")
	fl.StringVar(&f.prefix, "attr-prefix", worker.DefaultAttrPrefix, "inline ledger attribute prefix")
	fl.IntVar(&f.maxAttempts, "max-attempts", 5, "attempts before an item is dead-lettered")
	fl.DurationVar(&f.retryBackoff, "retry-backoff", time.Second, "delay before the second attempt (doubles per attempt, max 5m)")
	fl.BoolVar(&f.completeOnly, "complete-only", false, "no claim: handle, then complete with one conditional write")
	fl.BoolVar(&f.batchClaims, "batch-claims", false, "claim up to 25 items of a page in one transaction")
	fl.BoolVar(&f.consistent, "consistent-read", false, "strongly consistent scans")
	fl.Float64Var(&f.readRate, "read-rate", 0, "limit this worker's scan to so many RCU per second (0 = unlimited)")
	fl.Float64Var(&f.writeRate, "write-rate", 0, "limit this worker's ledger writes (claims, completions, retries, dead letters, releases) to so many WCU per second, backing off when throttled (default unlimited; must be > 0 when given)")
	fl.StringVar(&f.exec, "exec", "", "command to run per item (item JSON on stdin, DYNAPART_* in the environment)")
	fl.DurationVar(&f.execTimeout, "exec-timeout", 0, "kill --exec after this long (default: the claim's time)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long handlers in flight may finish")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics (/metrics) and the live status page (/, /api/status) on this address, e.g. :9090")
	fl.StringVar(&f.owner, "owner", "", "worker id in leases and claims (default hostname-pid-random)")
	fl.StringVar(&f.progress, "progress", "auto", "progress: auto (bar on a terminal, else a log line every 5s), bar, log, json (a line every 250ms on stdout), none")
	fl.StringVar(&f.record, "record", "", "append the key of every item this worker completes to this file (for audits and the demo)")
	fl.StringVar(&f.indexName, "index-name", "dp_pending", "index mode: the pending index")
	fl.StringVar(&f.shardAttr, "shard-attr", "dp_shard", "index mode: the shard attribute")
	fl.IntVar(&f.shards, "shards", 16, "index mode: number of shards (>= workers)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "read each slot's share as a run would and print, per slot, the items to process, sample keys and estimated RCU/WCU; no lease, no writes")
	return cmd
}

func runWork(cmd *cobra.Command, g *globals, f *workFlags) error {
	if f.table == "" {
		return usagef("--table is required")
	}
	if f.workers < 1 {
		return usagef("--workers must be at least 1, got %d", f.workers)
	}
	mode, err := scan.ParseMode(f.mode)
	if err != nil {
		return usagef("--mode %q: want segment, filter or index", f.mode)
	}
	if f.ledger != "inline" && f.ledger != "table" {
		return usagef("--ledger %q: want inline or table", f.ledger)
	}
	switch f.progress {
	case "auto", "bar", "log", "json", "none":
	default:
		return usagef("--progress %q: want auto, bar, log, json or none", f.progress)
	}
	if fl := cmd.Flags().Lookup("write-rate"); fl.Changed && !(f.writeRate > 0 && !math.IsInf(f.writeRate, 1)) {
		return usagef("--write-rate must be a number > 0 (WCU per second; leave it out for no limit), got %s", fl.Value)
	}
	if f.pageSize < 0 || f.pageSize > math.MaxInt32 { // worker.Config.PageSize is an int32
		return usagef("--page-size must be in [0, %d], got %d", math.MaxInt32, f.pageSize)
	}
	if f.dryRun {
		return runDryRun(cmd.Context(), g, f, mode, cmd.OutOrStdout())
	}
	log, line, err := g.logger()
	if err != nil {
		return err
	}

	// First signal: graceful shutdown. Second: exit at once.
	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer func() {
		signal.Stop(sigs)
		close(sigs) // ends the goroutine below; after Stop no signal is sent on sigs
	}()
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		log.Info("dynapart: signal received, shutting down gracefully (again to exit at once)", "signal", s.String())
		cancel(errSignal)
		if _, ok := <-sigs; ok {
			fmt.Fprintln(os.Stderr, "dynapart: second signal, exiting at once")
			os.Exit(exitRuntime)
		}
	}()

	db, err := g.dynamoClient(ctx)
	if err != nil {
		return err
	}
	var rec *os.File
	if f.record != "" {
		rec, err = os.OpenFile(f.record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return usagef("--record %q: %v", f.record, err)
		}
		defer rec.Close()
	}
	var w *worker.Worker
	var hooks []worker.Hooks
	var m *metrics
	if f.metricsAddr != "" {
		m = newMetrics(func() worker.Stats { return w.Stats() })
		hooks = append(hooks, m.hooks())
	}
	var firstAt time.Time
	var recMu sync.Mutex
	var tookOver, reported bool // guarded by recMu
	hooks = append(hooks, worker.Hooks{OnItem: func(e worker.ItemEvent) {
		if e.Outcome != worker.OutcomeCompleted {
			return
		}
		recMu.Lock()
		if firstAt.IsZero() {
			firstAt = time.Now()
		}
		report := tookOver && !reported
		reported = reported || tookOver
		recMu.Unlock()
		if report && f.progress == "json" {
			printJSONProgress(w, "first-after-takeover", firstAt)
		}
		if rec != nil {
			line, _ := plainJSON(e.Key)
			recMu.Lock()
			_, _ = rec.Write(append(line, '\n')) // unbuffered: survives SIGKILL of this process
			recMu.Unlock()
		}
	}, OnLease: func(e worker.LeaseEvent) {
		if e.Kind == worker.LeaseAcquired && e.TookOver {
			recMu.Lock()
			tookOver = true
			recMu.Unlock()
		}
		if f.progress == "json" {
			printJSONProgress(w, "lease-"+string(e.Kind), time.Time{})
		}
	}})

	w, err = worker.New(worker.Config{
		Client: db, Table: f.table, LeaseTable: f.leaseTable, Group: f.group, Workers: f.workers,
		Mode: mode, SubSegments: f.subSegments, PartitionAttr: f.partitionAttr,
		IndexName: f.indexName, ShardAttr: f.shardAttr, Shards: f.shards,
		ConsistentRead: f.consistent, ReadRate: f.readRate, WriteRate: f.writeRate, PageSize: int32(f.pageSize),
		Concurrency: f.concurrency, BatchClaims: f.batchClaims, CompleteOnly: f.completeOnly,
		LeaseTTL: f.leaseTTL, Heartbeat: f.heartbeat, StandbyPoll: f.standbyPoll, MaxClockSkew: f.maxSkew, ClaimTTL: f.claimTTL, MaxAttempts: f.maxAttempts,
		RetryBackoff: f.retryBackoff, Once: f.once, PollInterval: f.pollInterval, DrainTimeout: f.drainTimeout,
		Job: f.job, Ledger: worker.LedgerKind(f.ledger), LedgerTable: f.ledgerTable, AttrPrefix: f.prefix,
		Owner: f.owner, Logger: log, Hooks: chainHooks(hooks...),
	})
	if err != nil {
		return err
	}
	if m != nil {
		page, err := workerStatusPage(g, f, w)
		if err != nil {
			return err
		}
		m.mount = page.mount
		stopMetrics, err := m.serve(ctx, f.metricsAddr)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	handler := func(context.Context, worker.Item) error { return nil }
	if f.exec != "" {
		handler = execHandler(f.exec, f.execTimeout)
	}

	if !f.once {
		warnReadBill(ctx, log, db, f.table, readBill{Mode: mode, Workers: f.workers, Consistent: f.consistent, PollInterval: w.Config().PollInterval})
	}
	total := estimateShare(ctx, db, f.table, f.workers)
	stopProgress := startProgress(f.progress, w, total, log, line)
	start := time.Now()
	runErr := w.Run(ctx, handler)
	stopProgress()
	st := w.Stats()
	log.Info("dynapart: worker done", "owner", w.Config().Owner, "completed", st.Completed, "retried", st.Retried,
		"dead_lettered", st.DeadLettered, "skipped", st.Skipped, "released", st.Released, "takeovers", st.Takeovers,
		"unprocessable", st.Unprocessable, "abandoned", st.Abandoned, "rcu", st.RCU, "wcu", st.WCU,
		"write_throttles", st.WriteThrottles, "seconds", time.Since(start).Seconds())
	if f.progress == "json" {
		printJSONProgress(w, "exit", firstAt)
	}
	switch {
	case runErr == nil:
		return nil
	case errors.Is(context.Cause(ctx), errSignal):
		log.Info("dynapart: stopped by signal; claims and slot released")
		return nil
	default:
		return explainMismatch(runErr)
	}
}

var errSignal = errors.New("signal")

// estimateShare is the table's item count / N (DescribeTable's count, approximate on AWS), or 0.
func estimateShare(ctx context.Context, db *dynamodb.Client, table string, n int) int64 {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := describe(cctx, db, table)
	if err != nil || t == nil || t.ItemCount == nil {
		return 0
	}
	return *t.ItemCount / int64(n)
}

// startProgress shows the worker's progress until the returned function is called.
func startProgress(mode string, w *worker.Worker, total int64, log interface{ Info(string, ...any) }, line *statusLine) func() {
	if mode == "none" {
		return func() {}
	}
	if mode == "auto" {
		mode = "log"
		if isTerminal(os.Stderr) {
			mode = "bar"
		}
	}
	every := map[string]time.Duration{"bar": 200 * time.Millisecond, "log": 5 * time.Second, "json": 250 * time.Millisecond}[mode]
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m rateMeter
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				if mode == "bar" {
					line.Clear()
				}
				return
			case now := <-t.C:
				s := w.Stats()
				rate := m.update(now, s.Completed)
				switch mode {
				case "bar":
					slot := "standby"
					if s.Slot >= 0 {
						slot = fmt.Sprintf("slot %d (token %d)", s.Slot, s.Token)
					}
					line.Set(fmt.Sprintf("%-20s ▕%s▏ %d done %6.0f/s ETA %s  retried %d failed %d%s",
						slot, bar(s.Completed, total, 24), s.Completed, rate, eta(s.Completed, total, rate), s.Retried, s.DeadLettered, throttleNote(s)))
				case "log":
					log.Info("dynapart: progress", "slot", s.Slot, "state", s.State, "completed", s.Completed,
						"rate", int(rate), "retried", s.Retried, "dead_lettered", s.DeadLettered, "scanned", s.Scanned,
						"write_throttles", s.WriteThrottles, "write_rate_allowed", s.WriteRateAllowed)
				case "json":
					printJSONProgress(w, "progress", time.Time{})
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}

// throttleNote is the progress bar's note of throttled writes and the write rate allowed now.
func throttleNote(s worker.Stats) string {
	switch {
	case s.WriteThrottles == 0:
		return ""
	case s.WriteRateAllowed > 0:
		return fmt.Sprintf(" throttled %d (writes at %.0f WCU/s)", s.WriteThrottles, s.WriteRateAllowed)
	}
	return fmt.Sprintf(" throttled %d", s.WriteThrottles)
}

var stdoutMu sync.Mutex

func printJSONProgress(w *worker.Worker, event string, first time.Time) {
	s := w.Stats()
	p := progress.Line{Event: event, Time: time.Now().UnixMilli(), Owner: w.Config().Owner, Slot: s.Slot, Token: s.Token,
		State: string(s.State), Completed: s.Completed, Scanned: s.Scanned, Retried: s.Retried, Failed: s.DeadLettered,
		Takeovers: s.Takeovers, RCU: s.RCU, WCU: s.WCU, WriteThrottles: s.WriteThrottles, WriteRateAllowed: s.WriteRateAllowed}
	if !first.IsZero() {
		p.FirstDone = first.UnixMilli()
	}
	b, _ := json.Marshal(p)
	stdoutMu.Lock()
	os.Stdout.Write(append(b, '\n'))
	stdoutMu.Unlock()
}
