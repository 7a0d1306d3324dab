package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/internal/progress"
	"github.com/dynapart/dynapart/localstack"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

type demoFlags struct {
	items, slots, workers int
	killAt                float64
	leaseTTL              time.Duration
	keep                  bool
}

func newDemoCmd(g *globals) *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The flagship demonstration: a SIGKILLed worker, a standby takes over, every item done once",
		Long: `Runs the whole story on a local DynamoDB:

  1. starts DynamoDB Local (installing it if needed) unless --endpoint or AWS_ENDPOINT_URL_DYNAMODB
     points elsewhere;
  2. creates a table of --items items and the lease table;
  3. starts --workers 'dynapart work --once' processes for --slots slots (the extra ones are hot
     standbys), showing live progress per worker;
  4. kills one slot holder with SIGKILL at --kill-at of the items, and shows the standby taking its
     slot over from the checkpoint;
  5. ends with a summary: items per worker, takeover time, throughput, items completed twice and
     items missing (both must be 0), checked with verify.

Exits 0 only if every item is done exactly once.`,
		Example: `  make demo
  dynapart demo --items 50000 --slots 4 --workers 6`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd, g, &f) },
	}
	fl := cmd.Flags()
	fl.IntVar(&f.items, "items", 20000, "items in the demo table")
	fl.IntVar(&f.slots, "slots", 3, "slots N")
	fl.IntVar(&f.workers, "workers", 4, "worker processes (workers - slots are hot standbys)")
	fl.Float64Var(&f.killAt, "kill-at", 0.4, "fraction of items done when a slot holder is SIGKILLed")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 3*time.Second, "lease TTL of the workers (the takeover waits for it)")
	fl.BoolVar(&f.keep, "keep", false, "keep the demo tables afterwards")
	return cmd
}

// demoProc is one worker process of the demo.
type demoProc struct {
	id       int
	owner    string
	cmd      *exec.Cmd
	record   string
	mu       sync.Mutex
	last     progress.Line
	killed   bool
	exitCode int
	exited   chan struct{}
	firstAcq time.Time // when this process first held a slot after the kill
	firstAt  time.Time // its first completion after that
}

func runDemo(cmd *cobra.Command, g *globals, f *demoFlags) error {
	if f.items < 1 || f.slots < 1 || f.workers <= f.slots || f.killAt <= 0 || f.killAt >= 1 {
		return usagef("demo needs --items >= 1, --slots >= 1, --workers > --slots (a standby) and 0 < --kill-at < 1")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := os.Stdout
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	endpoint := g.endpoint
	if endpoint == "" && os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		say("== starting DynamoDB Local (installing it first if needed)")
		srv, err := localstack.Start(ctx, localstack.Options{})
		if err != nil {
			return err
		}
		defer srv.Stop()
		endpoint = srv.Endpoint()
		g.endpoint = endpoint
		say("   DynamoDB Local at %s", endpoint)
	}
	db, err := g.dynamoClient(ctx)
	if err != nil {
		return err
	}
	var sfx [3]byte
	_, _ = rand.Read(sfx[:])
	table := "dynapart-demo-" + hex.EncodeToString(sfx[:])
	leaseTable := "dynapart-demo-leases"
	say("== creating table %s with %d items", table, f.items)
	demoSchema := keySchema{Partition: keySpec{Name: "id", Type: "S"}}
	if _, _, err := ensureSourceTable(ctx, db, sourceTable{Name: table, Schema: demoSchema, Explicit: true}); err != nil {
		return err
	}
	if err := lock.CreateTable(ctx, db, leaseTable); err != nil {
		return err
	}
	if err := (seedJob{db: db, table: table, schema: demoSchema, items: f.items, payloadBytes: 100, parallel: 8}).run(ctx, out); err != nil {
		return err
	}
	if !f.keep {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = deleteTable(cctx, db, table)
		}()
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dynapart-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	say("== starting %d workers for %d slots (%d hot standby), lease TTL %s", f.workers, f.slots, f.workers-f.slots, f.leaseTTL)
	procs := make([]*demoProc, f.workers)
	start := time.Now()
	for i := range procs {
		p := &demoProc{id: i, owner: fmt.Sprintf("worker-%d", i), record: filepath.Join(dir, fmt.Sprintf("worker-%d.keys", i)), exited: make(chan struct{})}
		p.cmd = exec.Command(self, "work", "--endpoint", endpoint, "--table", table, "--lease-table", leaseTable,
			"--workers", fmt.Sprint(f.slots), "--once", "--lease-ttl", f.leaseTTL.String(), "--heartbeat", (f.leaseTTL / 4).String(),
			"--batch-claims", "--concurrency", "16", "--poll-interval", "1s", "--standby-poll", "250ms", "--max-clock-skew", "250ms",
			"--owner", p.owner, "--progress", "json", "--record", p.record, "--log-level", "warn")
		p.cmd.Env = append(os.Environ(), "DYNAPART_ENDPOINT="+endpoint)
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			return err
		}
		logf, err := os.Create(filepath.Join(dir, p.owner+".log"))
		if err != nil {
			return err
		}
		defer logf.Close()
		p.cmd.Stderr = logf
		if err := p.cmd.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		procs[i] = p
		go p.read(stdout)
		if i == f.slots-1 {
			time.Sleep(300 * time.Millisecond) // let the first N take the slots, so the last ones are standbys
		}
	}
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
		}
	}()

	tty := isTerminal(out)
	killAt := int64(float64(f.items) * f.killAt)
	var victim *demoProc
	var killTime time.Time
	var m rateMeter
	lines := 0
	deadline := time.After(5 * time.Minute)
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	lastLog := time.Time{}
	for running := true; running; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("demo: workers did not finish within 5 minutes (logs in %s)", dir)
		case now := <-ticker.C:
			var total int64
			for _, p := range procs {
				total += p.snapshot().Completed
			}
			rate := m.update(now, total)
			if victim == nil && total >= killAt {
				for _, p := range procs {
					if s := p.snapshot(); s.Slot >= 0 && s.State == "working" {
						victim = p
						break
					}
				}
				if victim != nil {
					_ = victim.cmd.Process.Signal(syscall.SIGKILL)
					victim.mu.Lock()
					victim.killed = true
					victim.mu.Unlock()
					killTime = time.Now()
					if tty {
						lines = 0
					}
					say("!! %d/%d done: SIGKILL %s (slot %d)", total, f.items, victim.owner, victim.snapshot().Slot)
				}
			}
			if tty {
				if lines > 0 {
					fmt.Fprintf(out, "\033[%dA", lines)
				}
				lines = renderDemo(out, procs, total, int64(f.items), rate)
			} else if now.Sub(lastLog) >= 2*time.Second {
				lastLog = now
				parts := []string{}
				for _, p := range procs {
					s := p.snapshot()
					parts = append(parts, fmt.Sprintf("%s slot=%d %s done=%d", p.owner, s.Slot, p.state(), s.Completed))
				}
				say("   %d/%d done %.0f/s | %s", total, f.items, rate, strings.Join(parts, " | "))
			}
			running = false
			for _, p := range procs {
				select {
				case <-p.exited:
				default:
					running = true
				}
			}
		}
	}
	wall := time.Since(start)

	// The audit. Record files are append-only logs each worker writes after every completion it
	// made: a key in two of them was completed twice. The ledger says who completed what (a
	// SIGKILL can cut a record line after its completion, never the other way round).
	counts := map[string]int{}
	for _, p := range procs {
		if _, err := readRecord(p.record, counts); err != nil {
			return err
		}
	}
	twice := 0
	for _, c := range counts {
		if c > 1 {
			twice++
		}
	}
	perWorker, err := doneByOwner(ctx, db, table)
	if err != nil {
		return err
	}
	led, err := worker.NewInlineLedger(db, table, []string{"id"}, worker.InlineOptions{})
	if err != nil {
		return err
	}
	sum, err := led.Summarize(ctx)
	if err != nil {
		return err
	}
	missing := int64(f.items) - sum.Done

	say("\n== summary")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tITEMS COMPLETED\tEXIT")
	for _, p := range procs {
		exit := fmt.Sprint(p.exitCode)
		if p.killed {
			exit = "SIGKILL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", p.owner, perWorker[p.owner], exit)
	}
	_ = tw.Flush()
	if victim != nil {
		var taker *demoProc
		for _, p := range procs {
			if p != victim && !p.firstAt.IsZero() && (taker == nil || p.firstAt.Before(taker.firstAt)) {
				taker = p
			}
		}
		if taker != nil {
			say("takeover:          %s took the slot %.1fs after the SIGKILL, first item completed %.1fs after it (lease TTL %s)",
				taker.owner, taker.firstAcq.Sub(killTime).Seconds(), taker.firstAt.Sub(killTime).Seconds(), f.leaseTTL)
		} else {
			say("takeover:          none observed")
		}
	}
	say("throughput:        %d items in %.1fs = %.0f items/s", f.items, wall.Seconds(), float64(f.items)/wall.Seconds())
	say("completed twice:   %d", twice)
	say("missing:           %d", missing)
	say("verify:            total %d, done %d, pending %d, claimed %d, failed %d", sum.Total, sum.Done, sum.Pending, sum.Claimed, sum.Failed)
	ok := twice == 0 && missing == 0 && sum.Total == int64(f.items)
	for _, p := range procs {
		if !p.killed && p.exitCode != 0 {
			ok = false
			say("worker %s exited with %d (log: %s)", p.owner, p.exitCode, filepath.Join(dir, p.owner+".log"))
		}
	}
	if !ok {
		f.keep = true
		return &exitError{code: exitRuntime, msg: "demo FAILED: not every item was done exactly once"}
	}
	say("\nOK: every item done exactly once, despite the SIGKILL.")
	return nil
}

func (p *demoProc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var l progress.Line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		p.mu.Lock()
		p.last = l
		if l.Event == "lease-acquired" && l.Takeovers > 0 && p.firstAcq.IsZero() {
			p.firstAcq = time.Now()
		}
		if l.Event == "first-after-takeover" && p.firstAt.IsZero() {
			p.firstAt = time.Now()
		}
		p.mu.Unlock()
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.exitCode = p.cmd.ProcessState.ExitCode()
	p.mu.Unlock()
	_ = err
	close(p.exited)
}

func (p *demoProc) snapshot() progress.Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *demoProc) state() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.killed:
		return "KILLED"
	case p.cmd.ProcessState != nil:
		return "exited"
	case p.last.State == "":
		return "starting"
	}
	return p.last.State
}

func renderDemo(w io.Writer, procs []*demoProc, total, items int64, rate float64) int {
	fmt.Fprintf(w, "\r\033[K  all      ▕%s▏ %6d/%d %6.0f items/s\n", bar(total, items, 30), total, items, rate)
	for _, p := range procs {
		s := p.snapshot()
		slot := "   -"
		if s.Slot >= 0 && p.state() == "working" {
			slot = fmt.Sprintf("slot %d", s.Slot)
		}
		fmt.Fprintf(w, "\r\033[K  %s %-7s %-9s %6d done  takeovers %d\n", p.owner, slot, p.state(), s.Completed, s.Takeovers)
	}
	return len(procs) + 1
}

// doneByOwner counts the done items of the table by the worker that completed them (dp_owner).
func doneByOwner(ctx context.Context, db *dynamodb.Client, table string) (map[string]int, error) {
	out := map[string]int{}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                aws.String(table),
		ProjectionExpression:     aws.String("#o, #s"),
		ExpressionAttributeNames: map[string]string{"#o": "dp_owner", "#s": "dp_status"},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("audit %q: %w", table, err)
		}
		for _, it := range page.Items {
			st, _ := it["dp_status"].(*types.AttributeValueMemberS)
			o, _ := it["dp_owner"].(*types.AttributeValueMemberS)
			if st != nil && st.Value == "done" && o != nil {
				out[o.Value]++
			}
		}
	}
	return out, nil
}
