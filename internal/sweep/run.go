package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/worker"
)

// RunTimeout bounds one run; a run still going then is a violation (a worker that never returns).
const RunTimeout = 15 * time.Second

// claimTTL is the runs' ClaimTTL (the least the worker allows).
const claimTTL = time.Second

// Result is what one run did and what broke.
type Result struct {
	Case       Case
	Calls      int64               // DynamoDB calls made
	Injected   *ddbfault.Injection // nil when the fault never fired (the run made fewer calls)
	RunErr     error               // what Run returned (the first error of the workers)
	Violations []string
	Wall       time.Duration
}

// OK reports whether no check failed.
func (r *Result) OK() bool { return len(r.Violations) == 0 }

func (r *Result) String() string {
	s := fmt.Sprintf("%s: %d calls", r.Case, r.Calls)
	if r.Injected != nil {
		s += fmt.Sprintf(", fault on call %d (%s %v)", r.Injected.Call, r.Injected.Op, ids(r.Injected.Keys...))
	}
	if r.RunErr != nil {
		s += fmt.Sprintf(", Run: %v", r.RunErr)
	}
	for _, v := range r.Violations {
		s += "\n    VIOLATION: " + v
	}
	return s
}

// config is the run's worker configuration: short timings, so that retries and claim ends
// happen within the run.
func (f *Fixture) config(c Case, source string, n int, client worker.DynamoDBClient) worker.Config {
	job := fmt.Sprintf("j%d", n)
	return worker.Config{
		Client: client, Table: source, LeaseTable: f.leaseTable, LedgerTable: f.ledgerTable, Ledger: c.Ledger,
		Group: fmt.Sprintf("%s/g%d", source, n), Job: job, Workers: c.Workers, Mode: c.Mode, SubSegments: 1, Shards: Shards,
		PageSize: 5, Concurrency: 2, BatchClaims: c.Claims == ClaimBatch, CompleteOnly: c.Claims == CompleteOnly,
		LeaseTTL: 3 * time.Second, Heartbeat: time.Second, MaxClockSkew: 100 * time.Millisecond, StandbyPoll: 50 * time.Millisecond,
		ClaimTTL: claimTTL, MaxAttempts: 3, RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond,
		Once: true, PollInterval: 50 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond, DrainTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// Run runs one case and checks it.
func (f *Fixture) Run(ctx context.Context, c Case) *Result {
	start := time.Now()
	res := &Result{Case: c}
	source, err := f.source(ctx, c.Mode)
	if err == nil {
		err = f.seed(ctx, source, c.Mode)
	}
	if err != nil {
		res.Violations = append(res.Violations, "setup: "+err.Error())
		return res
	}
	n := f.nextRun()
	rec := newRecorder(f.leaseTable)
	fc := ddbfault.New(f.db, ddbfault.WithTimeout(100*time.Millisecond))
	fc.OnSent(rec.onSent)
	fc.OnInject(rec.onInject)
	if c.Fault.At > 0 {
		fc.Inject(c.Fault)
	}
	cfg := f.config(c, source, n, fc)
	runErr, hung := f.runWorkers(ctx, c, cfg, rec)
	res.RunErr, res.Calls = runErr, fc.Calls()
	if in, ok := fc.Injected(); ok {
		res.Injected = &in
	}
	if hung {
		res.Violations = append(res.Violations, fmt.Sprintf("Run did not return within %s", RunTimeout))
	}
	res.Violations = append(res.Violations, f.check(ctx, c, cfg, rec, runErr)...)
	res.Violations = append(res.Violations, rec.leaseViolations()...)
	res.Wall = time.Since(start)
	return res
}

// runWorkers runs c.Workers workers to the end of the once-job; hung reports a worker still
// running after RunTimeout (it is then cancelled).
func (f *Fixture) runWorkers(ctx context.Context, c Case, cfg worker.Config, rec *recorder) (err error, hung bool) {
	ctx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	h := handler(c.Outcome, rec)
	if c.Outcome == OutcomeEffects {
		h = f.effectsHandler(cfg.Job, rec)
	}
	errs := make([]error, c.Workers)
	var wg sync.WaitGroup
	for i := range c.Workers {
		wc := cfg
		wc.Owner = fmt.Sprintf("w%d", i)
		w, err := worker.New(wc)
		if err != nil {
			return err, false
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Run(ctx, h)
		}()
	}
	wg.Wait()
	return errors.Join(errs...), ctx.Err() != nil
}

// permanentlyFailing: the items whose handler always fails in OutcomePermanent.
func permanentlyFailing(id string) bool { return id == itemID(0) || id == itemID(6) }

var errTransient = errors.New("sweep: transient handler failure")

// handler returns the outcome's handler, recording calls and side effects (a handler call that
// returned nil; a panic records none).
func handler(o Outcome, rec *recorder) worker.Handler {
	return func(ctx context.Context, it worker.Item) error {
		id := it.Key["id"].(*types.AttributeValueMemberS).Value
		rec.handlerStart(id)
		err := outcome(ctx, o, id, it.Attempt)
		rec.handlerEnd(id, err)
		return err
	}
}

func outcome(ctx context.Context, o Outcome, id string, attempt int) error {
	switch {
	case o == OutcomeFailOnce && id == itemID(5) && attempt == 1:
		return errTransient
	case o == OutcomePermanent && permanentlyFailing(id):
		return worker.Permanent(errTransient)
	case o == OutcomePanic && id == itemID(5) && attempt == 1:
		panic("sweep: handler panic")
	case o == OutcomeExceed && id == itemID(0) && attempt == 1:
		// The claim's end cancels ctx (complete-only has no claim: the handler just takes longer
		// than a claim would allow); the handler overstays a little, then succeeds.
		select {
		case <-ctx.Done():
		case <-time.After(claimTTL + 500*time.Millisecond):
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// effectsHandler succeeds with effects: the item's fx attribute + 1 and the run's counter + 1,
// committed with the completion.
func (f *Fixture) effectsHandler(run string, rec *recorder) worker.Handler {
	return worker.WithEffects(func(ctx context.Context, it worker.Item) (*worker.Effects, error) {
		id := it.Key["id"].(*types.AttributeValueMemberS).Value
		rec.handlerStart(id)
		rec.handlerEnd(id, nil)
		e := &worker.Effects{}
		return e.Item(ledger.Add("fx", 1)).Update(f.counters, f.counterKey(run), ledger.Add("n", 1)), nil
	})
}

func (f *Fixture) counterKey(run string) worker.Key {
	return worker.Key{"pk": &types.AttributeValueMemberS{Value: "counter#" + run}}
}

// checkEffects: every done item's effect applied once, none of another's, and the counter equals
// the done items.
func (f *Fixture) checkEffects(ctx context.Context, cfg worker.Config, done map[string]bool) []string {
	var v []string
	total := 0
	for i := range Items {
		id := itemID(i)
		n, err := f.number(ctx, cfg.Table, worker.Key{"id": &types.AttributeValueMemberS{Value: id}}, "fx")
		if err != nil {
			return []string{"effects: " + err.Error()}
		}
		want := 0
		if done[id] {
			want, total = 1, total+1
		}
		if n != want {
			v = append(v, fmt.Sprintf("%s: its effect applied %d times (done %v)", id, n, done[id]))
		}
	}
	n, err := f.number(ctx, f.counters, f.counterKey(cfg.Job), "n")
	if err != nil {
		return append(v, "effects: "+err.Error())
	}
	if n != total {
		v = append(v, fmt.Sprintf("the run's counter is %d, %d items done", n, total))
	}
	return v
}

// number reads attribute attr of key in table as an int (0 when missing).
func (f *Fixture) number(ctx context.Context, table string, key worker.Key, attr string) (int, error) {
	out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, err
	}
	nv, ok := out.Item[attr].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	return strconv.Atoi(nv.Value)
}

// check runs the checks of a finished run.
func (f *Fixture) check(ctx context.Context, c Case, cfg worker.Config, rec *recorder, runErr error) []string {
	var v []string
	ledger, err := f.ledger(c, cfg)
	if err != nil {
		return []string{"ledger: " + err.Error()}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	done := map[string]bool{}
	for i := range Items {
		id := itemID(i)
		st, err := ledger.State(ctx, worker.Key{"id": &types.AttributeValueMemberS{Value: id}})
		if err != nil {
			v = append(v, fmt.Sprintf("%s: state: %v", id, err))
			continue
		}
		done[id] = st.Status == worker.StatusDone
		permanent := c.Outcome == OutcomePermanent && permanentlyFailing(id)
		if runErr == nil && st.Status != worker.StatusDone && st.Status != worker.StatusFailed {
			v = append(v, fmt.Sprintf("%s: Run returned nil, item is %q (attempts %d, handler calls %d)", id, st.Status, st.Attempts, rec.calls[id]))
		}
		if st.Status == worker.StatusFailed && !permanent {
			v = append(v, fmt.Sprintf("%s: dead-lettered though its handler never failed permanently (attempts %d, handler calls %d, error %q)", id, st.Attempts, rec.calls[id], st.Error))
		}
		if st.Status == worker.StatusDone && permanent && c.Claims != CompleteOnly {
			v = append(v, fmt.Sprintf("%s: done though its handler always failed", id))
		}
		if rec.settled[id] > 1 {
			v = append(v, fmt.Sprintf("%s: settled (done or failed) by %d writes that landed", id, rec.settled[id]))
		}
		allowed := rec.inFlight[id] || (c.Outcome == OutcomeExceed && i == 0)
		if rec.effects[id] > 1 && !allowed {
			v = append(v, fmt.Sprintf("%s: side effect repeated (%d successful handler calls), not in flight at the fault", id, rec.effects[id]))
		}
	}
	if c.Outcome == OutcomeEffects {
		v = append(v, f.checkEffects(ctx, cfg, done)...)
	}
	sort.Strings(v)
	return v
}

func (f *Fixture) ledger(c Case, cfg worker.Config) (worker.Ledger, error) {
	if c.Ledger == worker.LedgerTable {
		return worker.NewTableLedger(f.db, f.ledgerTable, cfg.Job, cfg.Table, []string{"id"})
	}
	return worker.NewInlineLedger(f.db, cfg.Table, []string{"id"}, worker.InlineOptions{})
}
