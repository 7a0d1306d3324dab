// Package demo is `dynapart demo`, the flagship demonstration: worker processes (proc.go) watched
// live (watch.go), a SIGKILLed slot holder and the standby's takeover, a scale-up (resize.go), and
// the audit of every item done exactly once (audit.go).
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/seed"
	"github.com/dynapart/dynapart/localstack"
	"github.com/dynapart/dynapart/lock"
)

type demoFlags struct {
	items, slots, workers int
	scaleUp               int // slots added by dynapart scale after the takeover (0: none)
	killAt                float64
	leaseTTL              time.Duration
	keep                  bool
}

// New is `dynapart demo`.
func New(g *cli.Globals) *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The flagship demonstration: a SIGKILLed worker, a standby takes over, the group is scaled up, every item done once",
		Long: `Runs the whole story on a local DynamoDB:

  1. starts DynamoDB Local (installing it if needed) unless --endpoint or AWS_ENDPOINT_URL_DYNAMODB
     points elsewhere;
  2. creates a table of --items items and the lease table;
  3. starts --workers 'dynapart work --once' processes for --slots slots (the extra ones are hot
     standbys), showing live progress per worker;
  4. kills one slot holder with SIGKILL at --kill-at of the items, and shows the standby taking its
     slot over from the checkpoint;
  5. once the standby works, scales the running group up by --scale-up slots ('dynapart scale') and
     starts as many new workers without --workers (they join at the group's new N); the running
     workers re-plan within a heartbeat and carry on from their checkpoints;
  6. ends with a summary: items per worker, takeover time, the resize (plan epoch, new N),
     throughput, items completed twice and items missing (both must be 0), checked with verify.

Exits 0 only if every item is done exactly once (and, after the scale-up, the group ends at the
new N under plan epoch 1).`,
		Example: `  make demo
  dynapart demo --items 50000 --slots 4 --workers 6 --scale-up 2
  dynapart demo --scale-up 0   # no resize: only the SIGKILL and the takeover`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd, g, &f) },
	}
	fl := cmd.Flags()
	fl.IntVar(&f.items, "items", 20000, "items in the demo table")
	fl.IntVar(&f.slots, "slots", 3, "slots N")
	fl.IntVar(&f.workers, "workers", 4, "worker processes (workers - slots are hot standbys)")
	fl.Float64Var(&f.killAt, "kill-at", 0.4, "fraction of items done when a slot holder is SIGKILLed")
	fl.IntVar(&f.scaleUp, "scale-up", 1, "slots added with 'dynapart scale' once the standby has taken over, with as many new workers (0: no resize)")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 3*time.Second, "lease TTL of the workers (the takeover waits for it)")
	fl.BoolVar(&f.keep, "keep", false, "keep the demo tables afterwards")
	return cmd
}

// check is the demo's usage: a standby to take over and a kill point inside the run.
func (f *demoFlags) check() error {
	if f.items < 1 || f.slots < 1 || f.workers <= f.slots || f.killAt <= 0 || f.killAt >= 1 || f.scaleUp < 0 {
		return cli.Usagef("demo needs --items >= 1, --slots >= 1, --workers > --slots (a standby), 0 < --kill-at < 1 and --scale-up >= 0")
	}
	return nil
}

// demo is one run of `dynapart demo`: the tables, the worker processes and the kill.
type demo struct {
	f          *demoFlags
	g          *cli.Globals
	out        io.Writer // the story
	stderr     io.Writer // the seeding's progress
	db         *dynamodb.Client
	table      string
	leaseTable string
	dir        string // the workers' logs and record files
	procs      []*demoProc
	victim     *demoProc // the SIGKILLed slot holder, once killed
	killTime   time.Time
	resize     *demoResize // the scale-up, once done
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func runDemo(cmd *cobra.Command, g *cli.Globals, f *demoFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{f: f, g: g, out: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), leaseTable: "dynapart-demo-leases"}
	stopLocal, err := d.startDynamoDB(ctx)
	if err != nil {
		return err
	}
	defer stopLocal()
	if err := d.createTables(ctx); err != nil {
		return err
	}
	if !f.keep {
		defer d.dropTable()
	}
	if d.dir, err = os.MkdirTemp("", "dynapart-demo-"); err != nil {
		return err
	}
	defer os.RemoveAll(d.dir)
	start := time.Now()
	defer d.stopWorkers()
	if err := d.startWorkers(); err != nil {
		return err
	}
	if err := d.watch(ctx); err != nil {
		return err
	}
	wall := time.Since(start)
	a, err := d.audit(ctx)
	if err != nil {
		return err
	}
	d.readPlan(ctx)
	return d.summary(a, wall)
}

// startDynamoDB starts DynamoDB Local unless --endpoint or AWS_ENDPOINT_URL_DYNAMODB points
// elsewhere, and makes the client; stop stops the server it started.
func (d *demo) startDynamoDB(ctx context.Context) (stop func(), err error) {
	stop = func() {}
	if d.g.Endpoint == "" && d.g.IO.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		d.say("== starting DynamoDB Local (installing it first if needed)")
		srv, err := localstack.Start(ctx, localstack.Options{})
		if err != nil {
			return nil, err
		}
		stop = func() { _ = srv.Stop() }
		d.g.Endpoint = srv.Endpoint()
		d.say("   DynamoDB Local at %s", d.g.Endpoint)
	}
	if d.db, err = d.g.DynamoClient(ctx); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// createTables creates a table of --items items under a fresh name, and the lease table.
func (d *demo) createTables(ctx context.Context) error {
	var sfx [3]byte
	_, _ = rand.Read(sfx[:])
	d.table = "dynapart-demo-" + hex.EncodeToString(sfx[:])
	d.say("== creating table %s with %s", d.table, cli.Count(d.f.items, "item"))
	schema := cli.KeySchema{Partition: cli.KeySpec{Name: "id", Type: "S"}}
	if _, _, err := cli.EnsureSourceTable(ctx, d.db, cli.SourceTable{Name: d.table, Schema: schema, Explicit: true}); err != nil {
		return err
	}
	if err := lock.CreateTable(ctx, d.db, d.leaseTable); err != nil {
		return err
	}
	// The table is new and empty: batch writes, nothing to replace.
	seed := seed.Job{DB: d.db, Table: d.table, Schema: schema, Items: d.f.items, PayloadBytes: 100, Parallel: 8, Overwrite: true}
	return seed.Run(ctx, d.stderr)
}

// dropTable deletes the demo table (not the lease table, which the next demo reuses).
func (d *demo) dropTable() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = cli.DeleteTable(ctx, d.db, d.table)
}

// startWorkers starts --workers `dynapart work --once` processes for --slots slots.
func (d *demo) startWorkers() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	d.say("== starting %s for %s (%d hot standby), lease TTL %s", cli.Count(d.f.workers, "worker"), cli.Count(d.f.slots, "slot"), d.f.workers-d.f.slots, d.f.leaseTTL)
	for i := range d.f.workers {
		p, err := startDemoProc(d.workerCmd(self, i, false), d.dir)
		if err != nil {
			return err
		}
		d.procs = append(d.procs, p)
		if i == d.f.slots-1 {
			time.Sleep(300 * time.Millisecond) // let the first N take the slots, so the last ones are standbys
		}
	}
	return nil
}

// demoClaimTTL is the workers' --claim-ttl. The handler does nothing, so a claim needs little
// time; a claim left behind where no live holder can reclaim it by its token (the slot's new
// holder takes over its own slot's older claims at once) waits until it expires, and with the
// default minute one such claim after the SIGKILL and the resize stalled the end of a demo run by
// 40 seconds.
const demoClaimTTL = 10 * time.Second

// workerCmd is the command line of worker i; join leaves --workers out (it joins at the group's N).
func (d *demo) workerCmd(self string, i int, join bool) demoProcSpec {
	owner := fmt.Sprintf("worker-%d", i)
	record := filepath.Join(d.dir, owner+".keys")
	lease := d.f.leaseTTL
	args := []string{"work", "--endpoint", d.g.Endpoint, "--table", d.table, "--lease-table", d.leaseTable,
		"--once", "--lease-ttl", lease.String(), "--heartbeat", (lease / 4).String(),
		"--batch-claims", "--concurrency", "16", "--claim-ttl", demoClaimTTL.String(), "--poll-interval", "1s", "--standby-poll", "250ms", "--max-clock-skew", "250ms",
		"--owner", owner, "--progress", "json", "--record", record, "--log-level", "warn"}
	if !join {
		args = append(args, "--workers", fmt.Sprint(d.f.slots))
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "DYNAPART_ENDPOINT="+d.g.Endpoint)
	return demoProcSpec{id: i, owner: owner, record: record, cmd: cmd}
}

// stopWorkers kills the workers still running and closes their logs.
func (d *demo) stopWorkers() {
	for _, p := range d.procs {
		p.stop()
	}
}
