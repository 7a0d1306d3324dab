package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// Worker runs the lease -> scan -> claim -> handle -> complete loop for one slot at a time.
type Worker struct {
	cfg     Config
	running atomic.Bool
	stats   counters

	mu      sync.Mutex
	slot    int
	token   int64
	state   string
	scanner *scan.Scanner
	rcuDone float64
	ledger  Ledger
	scope   string // ClaimRequest.Scope of every claim, see claimScope
}

// New validates cfg, fills in its defaults and returns a Worker. It does no I/O: tables are
// checked when Run starts. An invalid field gives a *ConfigError naming it.
func New(cfg Config) (*Worker, error) {
	d := cfg.withDefaults()
	if err := d.validate(); err != nil {
		return nil, err
	}
	return &Worker{cfg: d, slot: -1, state: "idle", scope: claimScope(d)}, nil
}

// Config returns the configuration with its defaults filled in.
func (w *Worker) Config() Config { return w.cfg }

// env is what Run prepares once: the table's key, the lock client and the ledger.
type env struct {
	keyAttrs []string
	locks    *lock.Client
	ledger   Ledger
	meta     map[string]string
}

// Run takes a slot (waiting as a hot standby while all are held), processes the slot's share and,
// with Once, returns nil when the share is done (or at once when every slot of the group is
// finished). Without Once it processes continuously until ctx ends. It returns ctx.Err() when
// stopped by ctx (after draining handlers, releasing unfinished claims, saving the checkpoint and
// releasing the lease), and only after every goroutine it started has returned.
func (w *Worker) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return &ConfigError{Field: "handler", Reason: "required"}
	}
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("dynapart: Run is already running on this Worker")
	}
	defer w.running.Store(false)

	e, err := w.prepare(ctx)
	if err != nil {
		return err
	}
	var stopAt time.Time
	if dl, ok := ctx.Deadline(); ok {
		stopAt = dl.Add(-w.cfg.DeadlineMargin)
	}
	log := w.cfg.Logger
	for {
		w.setState(-1, 0, "standby")
		acquireCtx, cancel := w.untilStop(ctx, stopAt)
		lease, err := e.locks.AcquireSlot(acquireCtx, w.cfg.Group, w.cfg.Workers, lock.WithGroupMeta(e.meta), lock.WithGroupMetaDefaults(groupMetaDefaults()))
		stopped := acquireCtx.Err() != nil
		cancel()
		switch {
		case errors.Is(err, lock.ErrGroupFinished):
			w.setState(-1, 0, "finished")
			log.Info("dynapart: every slot of the group is finished", "group", w.cfg.Group)
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil && stopped:
			return fmt.Errorf("dynapart: stopped before the deadline: %w", context.DeadlineExceeded)
		case err != nil:
			return err
		}
		w.stats.leases.Add(1)
		if lease.TookOver() {
			w.stats.takeovers.Add(1)
		}
		w.leaseEvent("acquired", lease)
		log.Info("dynapart: slot acquired", "group", w.cfg.Group, "slot", lease.Slot(), "token", lease.Token(),
			"took_over", lease.TookOver(), "resuming", lease.Checkpoint() != "")

		finished, err := w.runSlot(ctx, e, lease, h, stopAt)
		if err != nil {
			return err
		}
		if finished && w.cfg.Once {
			w.setState(-1, 0, "finished")
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !stopAt.IsZero() && !w.cfg.Clock.Now().Before(stopAt) {
			return fmt.Errorf("dynapart: stopped before the deadline: %w", context.DeadlineExceeded)
		}
		// The lease was lost: back to standby.
	}
}

// untilStop derives a context that also ends at stopAt (when set), by the worker's clock.
func (w *Worker) untilStop(ctx context.Context, stopAt time.Time) (context.Context, context.CancelFunc) {
	if stopAt.IsZero() {
		return context.WithCancel(ctx)
	}
	c, cancel := context.WithCancel(ctx)
	d := stopAt.Sub(w.cfg.Clock.Now())
	if d <= 0 {
		cancel()
		return c, cancel
	}
	timer := w.cfg.Clock.After(d)
	done := make(chan struct{})
	go func() {
		select {
		case <-timer:
			cancel()
		case <-c.Done():
		}
		close(done)
	}()
	return c, func() { cancel(); <-done }
}

func (w *Worker) prepare(ctx context.Context) (*env, error) {
	c := w.cfg
	out, err := c.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.Table)})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, &ConfigError{Field: "Table", Reason: fmt.Sprintf("table %q does not exist", c.Table)}
		}
		return nil, fmt.Errorf("dynapart: describe table %q: %w", c.Table, err)
	}
	var keyAttrs []string
	for _, k := range out.Table.KeySchema {
		if k.KeyType == types.KeyTypeHash {
			keyAttrs = append([]string{aws.ToString(k.AttributeName)}, keyAttrs...)
		} else {
			keyAttrs = append(keyAttrs, aws.ToString(k.AttributeName))
		}
	}
	if c.Mode == scan.ModeIndex {
		found := false
		for _, g := range out.Table.GlobalSecondaryIndexes {
			found = found || aws.ToString(g.IndexName) == c.IndexName
		}
		if !found {
			return nil, &ConfigError{Field: "IndexName", Reason: fmt.Sprintf("table %q has no index %q (create it with scan.CreatePendingIndex or `dynapart init --index`)", c.Table, c.IndexName)}
		}
	}
	if err := lock.CheckTable(ctx, describeOnly{c.Client}, c.LeaseTable); err != nil {
		var te *lock.TableError
		if errors.As(err, &te) {
			return nil, &ConfigError{Field: "LeaseTable", Reason: te.Error() + " (create it with `dynapart init` or lock.CreateTable)", Err: err}
		}
		return nil, err
	}
	var ledger Ledger
	switch c.Ledger {
	case LedgerTable:
		lt, err := describeTable(ctx, c.Client, c.LedgerTable, "LedgerTable")
		if err != nil {
			return nil, err
		}
		if err := checkLedgerSchema(c.LedgerTable, lt); err != nil {
			return nil, &ConfigError{Field: "LedgerTable", Reason: err.Error(), Err: err}
		}
		ledger, err = NewTableLedger(c.Client, c.LedgerTable, c.Job, c.Table, keyAttrs)
	default:
		opts := InlineOptions{Prefix: c.AttrPrefix}
		if c.Mode == scan.ModeIndex {
			opts.RemoveOnDone = []string{c.ShardAttr}
		}
		ledger, err = NewInlineLedger(c.Client, c.Table, keyAttrs, opts)
	}
	if err != nil {
		return nil, err
	}
	locks, err := lock.New(c.Client, c.LeaseTable,
		lock.WithOwner(c.Owner), lock.WithLeaseTTL(c.LeaseTTL), lock.WithHeartbeat(c.Heartbeat),
		lock.WithMaxClockSkew(c.MaxClockSkew), lock.WithPollInterval(c.StandbyPoll),
		lock.WithClock(c.Clock), lock.WithLogger(c.Logger))
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.ledger = ledger
	w.mu.Unlock()
	return &env{keyAttrs: keyAttrs, locks: locks, ledger: ledger, meta: groupMeta(c)}, nil
}

// describeOnly lets lock.CheckTable read a table's description through the worker's client; a
// worker never creates tables.
type describeOnly struct{ DynamoDBClient }

func (describeOnly) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return nil, errors.New("dynapart: a worker does not create tables")
}

// describeTable describes a table the worker needs; a missing one is a *ConfigError naming field.
func describeTable(ctx context.Context, db DynamoDBClient, table, field string) (*types.TableDescription, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, &ConfigError{Field: field, Reason: fmt.Sprintf("table %q does not exist (create it with `dynapart init`)", table), Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("dynapart: describe table %q: %w", table, err)
	}
	return out.Table, nil
}

// slotCheckpoint is what the lease's checkpoint holds: the pass number, whether the pass met items
// that still need another pass (retries, items claimed elsewhere), and the scan position.
type slotCheckpoint struct {
	pass  int
	dirty bool
	scan  string
}

const checkpointPrefix = "dp1"

func (s slotCheckpoint) encode() string {
	d := "0"
	if s.dirty {
		d = "1"
	}
	return checkpointPrefix + "|" + strconv.Itoa(s.pass) + "|" + d + "|" + s.scan
}

func decodeSlotCheckpoint(v string) (slotCheckpoint, error) {
	if v == "" {
		return slotCheckpoint{}, nil
	}
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 || parts[0] != checkpointPrefix {
		return slotCheckpoint{}, fmt.Errorf("dynapart: malformed slot checkpoint (want %s|pass|dirty|scan)", checkpointPrefix)
	}
	pass, err := strconv.Atoi(parts[1])
	if err != nil || pass < 0 || (parts[2] != "0" && parts[2] != "1") {
		return slotCheckpoint{}, fmt.Errorf("dynapart: malformed slot checkpoint header %q", parts[0]+"|"+parts[1]+"|"+parts[2])
	}
	return slotCheckpoint{pass: pass, dirty: parts[2] == "1", scan: parts[3]}, nil
}

// runSlot works on one held lease until the slot's share is finished (once), ctx ends, the
// deadline nears, or the lease is lost. It always releases the lease (if still held) before it
// returns; finished reports that the slot was marked finished.
func (w *Worker) runSlot(ctx context.Context, e *env, lease *lock.Lease, h Handler, stopAt time.Time) (finished bool, err error) {
	log := w.cfg.Logger.With("slot", lease.Slot(), "token", lease.Token())
	w.setState(lease.Slot(), lease.Token(), "working")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := lease.Release(cctx); rerr != nil {
			if errors.Is(rerr, lock.ErrLeaseLost) {
				w.stats.leasesLost.Add(1)
				w.leaseEvent("lost", lease)
				log.Warn("dynapart: lease lost", "cause", context.Cause(lease.Context()))
				return
			}
			log.Error("dynapart: release lease", "err", rerr)
			return
		}
		w.leaseEvent("released", lease)
	}()

	cp, derr := decodeSlotCheckpoint(lease.Checkpoint())
	if derr != nil {
		log.Warn("dynapart: ignoring the slot's checkpoint, rescanning the share", "err", derr)
		cp = slotCheckpoint{}
	}
	var out outage
	for {
		res, err := w.runPass(ctx, e, lease, h, cp, stopAt)
		cp = res.cp
		switch {
		case ctx.Err() != nil, lease.Context().Err() != nil, res.deadline:
			return false, nil // stopped; Run decides what to return
		case err != nil:
			var ce *ConfigError
			if errors.As(err, &ce) {
				return false, err
			}
			if out.fail(w.cfg.Clock.Now(), w.cfg.OutageTimeout) {
				return false, fmt.Errorf("dynapart: slot %d: giving up after %d failed passes in %s (OutageTimeout): %w",
					lease.Slot(), out.failures, w.cfg.OutageTimeout, err)
			}
			log.Error("dynapart: pass failed, retrying from the last checkpoint", "err", err, "failures", out.failures)
			if !w.wait(ctx, lease, stopAt, backoff(time.Second, 30*time.Second, out.failures)) {
				return false, nil
			}
			continue
		}
		out = outage{}
		w.stats.passes.Add(1)
		log.Info("dynapart: pass complete", "pass", cp.pass, "again", cp.dirty)
		wait := w.cfg.PollInterval
		if w.cfg.Once {
			if !cp.dirty {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				err := lease.MarkFinished(cctx)
				cancel()
				if err != nil {
					if errors.Is(err, lock.ErrLeaseLost) {
						return false, nil
					}
					return false, fmt.Errorf("dynapart: mark slot %d finished: %w", lease.Slot(), err)
				}
				w.leaseEvent("finished", lease)
				log.Info("dynapart: slot finished")
				return true, nil
			}
			if res.nextDue > 0 && res.nextDue < wait {
				wait = res.nextDue
			}
		}
		cp = slotCheckpoint{pass: cp.pass + 1}
		if err := w.saveCheckpoint(ctx, lease, cp.encode()); err != nil {
			return false, nil
		}
		if !w.wait(ctx, lease, stopAt, wait) {
			return false, nil
		}
	}
}

// wait pauses for d by the worker's clock; false when ctx ends, the lease is lost or stopAt passes.
func (w *Worker) wait(ctx context.Context, lease *lock.Lease, stopAt time.Time, d time.Duration) bool {
	// Reaching stopAt first ends the wait too, but as a stop (false).
	cutShort := false
	if !stopAt.IsZero() {
		if left := stopAt.Sub(w.cfg.Clock.Now()); left < d {
			if left <= 0 {
				return false
			}
			d, cutShort = left, true
		}
	}
	select {
	case <-ctx.Done():
		return false
	case <-lease.Done():
		return false
	case <-w.cfg.Clock.After(d):
		return !cutShort
	}
}

func (w *Worker) saveCheckpoint(ctx context.Context, lease *lock.Lease, v string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := lease.SaveCheckpoint(cctx, v)
	if err != nil && !errors.Is(err, lock.ErrLeaseLost) {
		w.cfg.Logger.Warn("dynapart: save checkpoint", "slot", lease.Slot(), "err", err)
	}
	return err
}

// passResult is what a pass leaves behind.
type passResult struct {
	cp       slotCheckpoint // position reached (complete only when err == nil)
	nextDue  time.Duration  // once mode: when the earliest pending retry or foreign claim is due
	deadline bool           // stopped because the ctx deadline is near
}

// passState is shared by a pass's goroutines.
type passState struct {
	dirty   atomic.Bool
	mu      sync.Mutex
	nextDue time.Time
	gate    *claimGate // with BatchClaims: bounds claims made ahead of the handlers
}

func (p *passState) again(due time.Time) {
	p.dirty.Store(true)
	p.mu.Lock()
	if p.nextDue.IsZero() || due.Before(p.nextDue) {
		p.nextDue = due
	}
	p.mu.Unlock()
}

type task struct {
	item  *scan.Item
	key   Key
	claim *Claim // set when claimed in a batch
	// attempt is the attempt a complete-only item makes (its recorded attempts + 1); claims
	// carry their own.
	attempt int
}

// runPass scans the slot's share once (resuming from cp) and handles every item it yields.
func (w *Worker) runPass(ctx context.Context, e *env, lease *lock.Lease, h Handler, cp slotCheckpoint, stopAt time.Time) (passResult, error) {
	c := w.cfg
	res := passResult{cp: cp}
	ps := &passState{}
	ps.dirty.Store(cp.dirty)
	if c.BatchClaims {
		ps.gate = newClaimGate(c.Concurrency, c.ClaimTTL)
	}

	// fetchCtx stops claiming: shutdown, lease loss, or the deadline margin.
	fetchCtx, cancelFetch := w.untilStop(lease.Context(), stopAt)
	defer cancelFetch()
	stopFetchOnCtx := context.AfterFunc(ctx, cancelFetch)
	defer stopFetchOnCtx()
	// workCtx cancels handlers: lease loss, or DrainTimeout after shutdown / the stop time.
	workCtx, cancelWork := context.WithCancelCause(lease.Context())
	defer cancelWork(nil)
	drainDone := make(chan struct{})
	drainExited := make(chan struct{})
	go func() {
		defer close(drainExited)
		select {
		case <-fetchCtx.Done():
		case <-drainDone:
			return
		}
		select {
		case <-w.cfg.Clock.After(c.DrainTimeout):
			cancelWork(ErrStopped)
		case <-drainDone:
		case <-workCtx.Done():
		}
	}()
	defer func() { close(drainDone); <-drainExited }()

	projection := c.Projection
	if len(projection) > 0 && c.Ledger == LedgerInline {
		projection = append(append([]string(nil), projection...), c.AttrPrefix+"status", c.AttrPrefix+"claim_until",
			c.AttrPrefix+"slot", c.AttrPrefix+"token", c.AttrPrefix+"scope", c.AttrPrefix+"retry_at", c.AttrPrefix+"attempts")
	}
	var latest atomic.Pointer[string]
	scfg := scan.Config{
		Client: c.Client, Table: c.Table, Slot: lease.Slot(),
		Plan:          scan.Plan{Mode: c.Mode, Slots: c.Workers, SubSegments: c.SubSegments},
		PartitionAttr: c.PartitionAttr, IndexName: c.IndexName, ShardAttr: c.ShardAttr, Shards: c.Shards,
		ConsistentRead: c.ConsistentRead, Projection: projection, ReadRate: c.ReadRate, PageLimit: c.PageSize,
		Resume:       cp.scan,
		OnCheckpoint: func(v string) { latest.Store(&v) },
	}
	sc, err := scan.New(scfg)
	if err != nil && cp.scan != "" && (errors.Is(err, scan.ErrCheckpointMismatch) || errors.Is(err, scan.ErrBadCheckpoint)) {
		c.Logger.Warn("dynapart: the slot's scan checkpoint does not fit this table or plan; rescanning the share", "err", err)
		scfg.Resume = ""
		sc, err = scan.New(scfg)
	}
	if err != nil {
		return res, err
	}
	w.mu.Lock()
	w.scanner = sc
	w.mu.Unlock()
	defer func() {
		st := sc.Stats()
		w.mu.Lock()
		w.scanner = nil
		w.rcuDone += st.RCU
		w.mu.Unlock()
	}()

	current := func() slotCheckpoint {
		out := slotCheckpoint{pass: cp.pass, scan: cp.scan}
		if v := latest.Load(); v != nil {
			out.scan = *v
		}
		out.dirty = ps.dirty.Load() // read after the position: see passState
		return out
	}

	// The checkpoint saver.
	saverStop := make(chan struct{})
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		saved := cp.encode()
		for {
			select {
			case <-saverStop:
				return
			case <-w.cfg.Clock.After(c.CheckpointInterval):
			}
			if v := current().encode(); v != saved {
				if err := w.saveCheckpoint(ctx, lease, v); err == nil {
					saved = v
				}
			}
		}
	}()

	tasks := make(chan task, c.Concurrency)
	// With batched claims, successful items are completed in batches too, by one goroutine.
	var completions chan completion
	completerDone := make(chan struct{})
	if bc, ok := e.ledger.(BatchCompleter); ok && c.BatchClaims {
		completions = make(chan completion, c.Concurrency)
		go func() {
			defer close(completerDone)
			w.completer(ctx, e, bc, completions, ps)
		}()
	} else {
		close(completerDone)
	}
	var wg sync.WaitGroup
	for range c.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				w.process(ctx, workCtx, e, lease, h, t, ps, completions)
			}
		}()
	}
	scanErr := sc.Run(fetchCtx, func(fctx context.Context, p *scan.Page) error {
		return w.dispatch(fctx, e, lease, p, tasks, ps)
	})
	close(tasks)
	wg.Wait()
	if completions != nil {
		close(completions)
	}
	<-completerDone
	close(saverStop)
	<-saverDone

	res.cp = current()
	if lease.Context().Err() == nil {
		_ = w.saveCheckpoint(ctx, lease, res.cp.encode())
	}
	ps.mu.Lock()
	if !ps.nextDue.IsZero() {
		res.nextDue = max(ps.nextDue.Sub(c.Clock.Now()), 100*time.Millisecond)
	}
	ps.mu.Unlock()
	res.deadline = !stopAt.IsZero() && !c.Clock.Now().Before(stopAt)
	if scanErr != nil {
		if fetchCtx.Err() != nil {
			return res, fetchCtx.Err()
		}
		return res, scanErr
	}
	if !sc.Done() {
		return res, errors.New("dynapart: scan ended with unacknowledged items")
	}
	return res, nil
}

// dispatch hands a page's items to the handler goroutines, claiming them in batches first when
// BatchClaims is set. Items that need no work are acknowledged at once.
func (w *Worker) dispatch(ctx context.Context, e *env, lease *lock.Lease, p *scan.Page, tasks chan<- task, ps *passState) error {
	c := w.cfg
	now := c.Clock.Now()
	todo := make([]task, 0, len(p.Items))
	for _, it := range p.Items {
		w.stats.scanned.Add(1)
		key := keyOf(it.Attrs, e.keyAttrs)
		if c.Ledger == LedgerInline {
			if skip, due := w.prefilter(it.Attrs, lease, now); skip {
				w.stats.skipped.Add(1)
				w.itemEvent(OutcomeSkipped, key, lease.Slot(), 0, 0)
				if !due.IsZero() {
					ps.again(due)
				}
				it.Ack()
				continue
			}
		}
		todo = append(todo, task{item: it, key: key})
	}
	if c.CompleteOnly {
		var err error
		if todo, err = w.completeOnlyStates(ctx, e, lease, todo); err != nil {
			return err
		}
	}
	if !c.BatchClaims {
		for _, t := range todo {
			select {
			case tasks <- t:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	// Batched claims: claim only as many items as handlers can start soon (at most 25 in one
	// transaction; see claimGate) and hand them over before claiming more, so a claim's clock
	// does not run while its item waits in the queue.
	for len(todo) > 0 {
		n, err := ps.gate.take(ctx, min(maxBatch, len(todo)))
		if err != nil {
			return err
		}
		chunk := todo[:n]
		todo = todo[n:]
		if err := w.claimAndSend(ctx, e, lease, chunk, tasks, ps); err != nil {
			return err
		}
	}
	return nil
}

// claimAndSend claims chunk in one transaction and hands the claimed items to the handlers. The
// chunk holds one gate place per item; the places of items not handed over are given back here.
func (w *Worker) claimAndSend(ctx context.Context, e *env, lease *lock.Lease, chunk []task, tasks chan<- task, ps *passState) error {
	c := w.cfg
	now := c.Clock.Now()
	until := now.Add(c.ClaimTTL)
	reqs := make([]ClaimRequest, len(chunk))
	for i, t := range chunk {
		reqs[i] = w.claimRequest(t.key, lease, now, until)
	}
	outs, err := e.ledger.Claim(ctx, reqs)
	if err != nil && isValidation(err) {
		// One item of the batch cannot be claimed: claim them one by one to find it.
		ps.gate.give(len(chunk))
		for _, t := range chunk {
			select {
			case tasks <- t:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	if err != nil {
		ps.gate.give(len(chunk))
		return fmt.Errorf("dynapart: claim batch: %w", err)
	}
	var claimed []task
	for i, o := range outs {
		switch {
		case o.Err != nil:
			ps.gate.give(1)
			w.unprocessable(chunk[i], lease, o.Err)
		case !o.Claimed:
			ps.gate.give(1)
			w.skipped(chunk[i].key, o.Status, lease, now, ps)
			chunk[i].item.Ack()
		default:
			w.stats.claimed.Add(1)
			cl := o.Claim
			chunk[i].claim = &cl
			w.itemEvent(OutcomeClaimed, cl.Key, cl.Slot, cl.Attempt, 0)
			claimed = append(claimed, chunk[i])
		}
	}
	for i, t := range claimed {
		select {
		case tasks <- t:
		case <-ctx.Done():
			w.releaseUnsent(ctx, e, claimed[i:])
			ps.gate.give(len(claimed[i:]))
			return ctx.Err()
		}
	}
	return nil
}

// maxBatch is the most items one TransactWriteItems claims.
const maxBatch = 25

func (w *Worker) releaseUnsent(ctx context.Context, e *env, ts []task) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, t := range ts {
		if t.claim != nil {
			if err := e.ledger.Release(cctx, *t.claim, w.cfg.Clock.Now()); err == nil {
				w.stats.released.Add(1)
			}
		}
	}
}

// unprocessable reports an item that cannot hold the ledger's state (e.g. the inline ledger's
// attributes would push it past 400 KB): no retry can help. Counted, logged with its key and
// skipped; it stays pending in the ledger, where `dynapart verify` counts it.
func (w *Worker) unprocessable(t task, lease *lock.Lease, err error) {
	w.stats.unprocessable.Add(1)
	w.itemEvent(OutcomeUnprocessable, t.key, lease.Slot(), 0, 0)
	w.cfg.Logger.Error("dynapart: an item cannot be claimed and is skipped (too large for the inline ledger? use the table ledger)",
		"slot", lease.Slot(), "key", keyText(t.key), "err", err)
	t.item.Ack()
}

// keyText is an item key for logs: the canonical encoding of its attributes sorted by name.
func keyText(k Key) string {
	s, err := encodeKeyParts(k, keysSorted(k))
	if err != nil {
		return fmt.Sprint(k)
	}
	return s
}

func (w *Worker) skipped(key Key, st Status, lease *lock.Lease, now time.Time, ps *passState) {
	w.stats.skipped.Add(1)
	w.itemEvent(OutcomeSkipped, key, lease.Slot(), 0, 0)
	switch st {
	case StatusClaimed:
		ps.again(now.Add(min(w.cfg.ClaimTTL, w.cfg.PollInterval)))
	case StatusRetry:
		ps.again(now.Add(min(w.cfg.RetryBackoff, w.cfg.PollInterval)))
	}
}

// prefilter skips, without a write, items whose inline state shows there is nothing to do now.
// The conditional claim stays the judge; this only saves writes. due is when to look again (zero
// for items that are finished for good).
func (w *Worker) prefilter(attrs map[string]types.AttributeValue, lease *lock.Lease, now time.Time) (skip bool, due time.Time) {
	p := w.cfg.AttrPrefix
	st, _ := attrs[p+"status"].(*types.AttributeValueMemberS)
	if st == nil {
		return false, time.Time{}
	}
	switch Status(st.Value) {
	case StatusDone, StatusFailed:
		return true, time.Time{}
	case StatusClaimed:
		if w.cfg.CompleteOnly {
			return false, time.Time{}
		}
		until := msAttr(attrs[p+"claim_until"])
		slot := intAttr(attrs[p+"slot"])
		token := intAttr(attrs[p+"token"])
		scope, _ := attrs[p+"scope"].(*types.AttributeValueMemberS)
		newer := slot == int64(lease.Slot()) && token < lease.Token() && scope != nil && scope.Value == w.scope
		if until.After(now) && !newer {
			return true, until
		}
	case StatusRetry:
		if w.cfg.CompleteOnly {
			return false, time.Time{}
		}
		if at := msAttr(attrs[p+"retry_at"]); at.After(now) {
			return true, at
		}
	}
	return false, time.Time{}
}

func msAttr(v types.AttributeValue) time.Time {
	n := intAttr(v)
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

func intAttr(v types.AttributeValue) int64 {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	i, _ := strconv.ParseInt(n.Value, 10, 64)
	return i
}

func keyOf(attrs map[string]types.AttributeValue, keyAttrs []string) Key {
	k := make(Key, len(keyAttrs))
	for _, a := range keyAttrs {
		if v, ok := attrs[a]; ok {
			k[a] = v
		}
	}
	return k
}

func (w *Worker) claimRequest(key Key, lease *lock.Lease, now, until time.Time) ClaimRequest {
	return ClaimRequest{Key: key, Owner: w.cfg.Owner, Slot: lease.Slot(), Token: lease.Token(), Scope: w.scope, Now: now, Until: until}
}

// process claims (unless claimed in a batch), runs the handler and records the outcome.
func (w *Worker) process(ctx, workCtx context.Context, e *env, lease *lock.Lease, h Handler, t task, ps *passState, completions chan<- completion) {
	c := w.cfg
	if workCtx.Err() != nil {
		// Stopped before this item started: give a batch claim back, leave the item unacknowledged.
		if t.claim != nil {
			w.releaseUnsent(ctx, e, []task{t})
			ps.gate.give(1)
		}
		return
	}
	// Writes that record an outcome must not be cut short by shutdown.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	now := c.Clock.Now()
	if c.CompleteOnly {
		w.completeOnly(wctx, workCtx, e, lease, h, t, ps, now)
		return
	}
	claim := t.claim
	if claim != nil {
		defer ps.gate.give(1) // the batched claim's handler is free again when process returns
		if w.tooLate(*claim, now) {
			w.giveBackLate(wctx, e, t, ps)
			return
		}
	}
	if claim == nil {
		// The claim write is not cut short by shutdown (wctx), so a graceful stop never leaves a
		// claim of unknown outcome behind: what it claims, it handles or releases.
		outs, err := e.ledger.Claim(wctx, []ClaimRequest{w.claimRequest(t.key, lease, now, now.Add(c.ClaimTTL))})
		if err != nil && isValidation(err) {
			w.unprocessable(t, lease, err)
			return
		}
		if err != nil {
			c.Logger.Warn("dynapart: claim failed; the item will be tried again", "slot", lease.Slot(), "err", err)
			ps.again(now.Add(min(c.RetryBackoff, c.PollInterval)))
			t.item.Ack()
			return
		}
		if !outs[0].Claimed {
			w.skipped(t.key, outs[0].Status, lease, now, ps)
			t.item.Ack()
			return
		}
		w.stats.claimed.Add(1)
		claim = &outs[0].Claim
		w.itemEvent(OutcomeClaimed, claim.Key, claim.Slot, claim.Attempt, 0)
	}
	if claim.Attempt > c.MaxAttempts {
		// Earlier attempts ended without an outcome (their workers died): do not loop forever.
		msg := fmt.Sprintf("dynapart: attempt %d exceeds MaxAttempts %d (earlier attempts ended without an outcome)", claim.Attempt, c.MaxAttempts)
		w.deadLetter(wctx, e, lease, *claim, msg, 0, ps)
		t.item.Ack()
		return
	}

	item := Item{Key: t.key, Attrs: t.item.Attrs, Attempt: claim.Attempt, Slot: claim.Slot, Token: claim.Token,
		IdempotencyKey: idempotencyKey(c.Job, c.Table, t.key)}
	hctx, hcancel := w.claimContext(workCtx, claimDeadline(c.ClaimTTL, claim.Until))
	start, startClock := time.Now(), c.Clock.Now()
	herr, gaveUp := w.runWithGrace(hctx, h, item)
	took := time.Since(start)
	if t.claim != nil {
		ps.gate.observe(c.Clock.Now().Sub(startClock))
	}
	expiring := errors.Is(context.Cause(hctx), ErrClaimExpiring)
	hcancel()
	if gaveUp {
		w.abandoned(t, lease, claim.Until, expiring || workCtx.Err() == nil, ps)
		return
	}

	switch {
	case herr == nil && completions != nil:
		completions <- completion{t: t, claim: *claim, took: took}
		return // the completer acknowledges it
	case herr == nil:
		w.completed(wctx, t, *claim, e.ledger.Complete(wctx, *claim, c.Clock.Now()), took, ps)
	case workCtx.Err() != nil && !expiring:
		// Shutdown or lease loss interrupted the handler: give the item back, not counted.
		if err := e.ledger.Release(wctx, *claim, c.Clock.Now()); err == nil {
			w.stats.released.Add(1)
			w.itemEvent(OutcomeReleased, t.key, claim.Slot, claim.Attempt, took)
		}
		return // not acknowledged: the next holder rescans it
	default:
		w.failed(wctx, e, lease, *claim, herr, took, ps)
	}
	t.item.Ack()
}

// completed records the outcome of a completion write.
func (w *Worker) completed(ctx context.Context, t task, claim Claim, err error, took time.Duration, ps *passState) {
	c := w.cfg
	switch {
	case err == nil:
		w.stats.completed.Add(1)
		w.itemEvent(OutcomeCompleted, t.key, claim.Slot, claim.Attempt, took)
		if c.Mode == scan.ModeIndex && c.Ledger == LedgerTable {
			w.leaveIndex(ctx, t.key)
		}
	case errors.Is(err, ErrClaimLost):
		w.stats.claimLost.Add(1)
		w.itemEvent(OutcomeClaimLost, t.key, claim.Slot, claim.Attempt, took)
		c.Logger.Warn("dynapart: claim lost before completion; another worker owns the item now", "slot", claim.Slot, "attempt", claim.Attempt)
	default:
		// Unknown outcome: the claim expires and the item is handled again.
		c.Logger.Error("dynapart: complete", "slot", claim.Slot, "err", err)
		ps.again(claim.Until)
	}
}

// completion is a handled item waiting for its batched completion write.
type completion struct {
	t     task
	claim Claim
	took  time.Duration
}

// completer completes handled items in batches of up to 25: it takes what is waiting (at least
// one) and writes it in one transaction, so batches grow with the load and add no delay.
func (w *Worker) completer(ctx context.Context, e *env, bc BatchCompleter, in <-chan completion, ps *passState) {
	wctx := context.WithoutCancel(ctx)
	for first := range in {
		batch := []completion{first}
	fill:
		for len(batch) < maxBatch {
			select {
			case c, ok := <-in:
				if !ok {
					break fill
				}
				batch = append(batch, c)
			default:
				break fill
			}
		}
		claims := make([]Claim, len(batch))
		for i, b := range batch {
			claims[i] = b.claim
		}
		cctx, cancel := context.WithTimeout(wctx, 30*time.Second)
		errs := bc.CompleteBatch(cctx, claims, w.cfg.Clock.Now())
		for i, b := range batch {
			w.completed(cctx, b.t, b.claim, errs[i], b.took, ps)
			b.t.item.Ack()
		}
		cancel()
	}
}

func (w *Worker) completeOnly(wctx, workCtx context.Context, e *env, lease *lock.Lease, h Handler, t task, ps *passState, now time.Time) {
	c := w.cfg
	req := w.claimRequest(t.key, lease, now, now)
	item := Item{Key: t.key, Attrs: t.item.Attrs, Attempt: max(t.attempt, 1), Slot: lease.Slot(), Token: lease.Token(),
		IdempotencyKey: idempotencyKey(c.Job, c.Table, t.key)}
	start := time.Now()
	herr, gaveUp := w.runWithGrace(workCtx, h, item)
	took := time.Since(start)
	if gaveUp {
		w.abandoned(t, lease, now, false, ps)
		return
	}
	if herr != nil {
		if workCtx.Err() != nil {
			return // interrupted: not acknowledged
		}
		c.Logger.Warn("dynapart: handler failed (complete-only)", "slot", lease.Slot(), "err", herr)
		w.completeOnlyFailed(wctx, e, lease, t, herr, took, ps)
		t.item.Ack()
		return
	}
	done, err := e.ledger.CompleteOnly(wctx, req)
	switch {
	case err != nil:
		c.Logger.Error("dynapart: complete", "slot", lease.Slot(), "err", err)
		ps.again(now.Add(c.RetryBackoff))
	case done:
		w.stats.completed.Add(1)
		w.itemEvent(OutcomeCompleted, t.key, lease.Slot(), item.Attempt, took)
		if c.Mode == scan.ModeIndex && c.Ledger == LedgerTable {
			w.leaveIndex(wctx, t.key)
		}
	default:
		w.stats.skipped.Add(1)
		w.itemEvent(OutcomeSkipped, t.key, lease.Slot(), item.Attempt, took)
	}
	t.item.Ack()
}

// failed records a failed attempt: a retry with backoff, or a dead letter.
func (w *Worker) failed(ctx context.Context, e *env, lease *lock.Lease, cl Claim, herr error, took time.Duration, ps *passState) {
	c := w.cfg
	var pe *PanicError
	if errors.As(herr, &pe) {
		w.stats.panics.Add(1)
		c.Logger.Error("dynapart: handler panicked", "slot", cl.Slot, "attempt", cl.Attempt, "panic", pe.Value, "stack", string(pe.Stack))
	}
	permanent, after := classify(herr)
	if permanent || cl.Attempt >= c.MaxAttempts {
		w.deadLetter(ctx, e, lease, cl, herr.Error(), took, ps)
		return
	}
	if after <= 0 {
		after = backoff(c.RetryBackoff, c.MaxRetryBackoff, cl.Attempt)
	}
	at := c.Clock.Now().Add(after)
	err := e.ledger.Retry(ctx, cl, herr.Error(), at)
	switch {
	case err == nil:
		w.stats.retried.Add(1)
		w.itemEvent(OutcomeRetried, cl.Key, cl.Slot, cl.Attempt, took)
		ps.again(at)
	case errors.Is(err, ErrClaimLost):
		w.stats.claimLost.Add(1)
		w.itemEvent(OutcomeClaimLost, cl.Key, cl.Slot, cl.Attempt, took)
	default:
		c.Logger.Error("dynapart: record retry", "slot", cl.Slot, "err", err)
		ps.again(cl.Until)
	}
}

func (w *Worker) deadLetter(ctx context.Context, e *env, lease *lock.Lease, cl Claim, msg string, took time.Duration, ps *passState) {
	c := w.cfg
	err := e.ledger.DeadLetter(ctx, cl, msg, c.Clock.Now())
	switch {
	case err == nil:
		w.stats.deadLettered.Add(1)
		w.itemEvent(OutcomeDeadLettered, cl.Key, cl.Slot, cl.Attempt, took)
		c.Logger.Warn("dynapart: item dead-lettered", "slot", cl.Slot, "attempt", cl.Attempt)
		if c.Mode == scan.ModeIndex {
			w.leaveIndex(ctx, cl.Key)
		}
	case errors.Is(err, ErrClaimLost):
		w.stats.claimLost.Add(1)
		w.itemEvent(OutcomeClaimLost, cl.Key, cl.Slot, cl.Attempt, took)
	default:
		// Unknown outcome: the item is kept for a later pass, which reclaims it once the claim
		// has expired (or finds it failed).
		c.Logger.Error("dynapart: record dead letter; the item will be tried again", "slot", cl.Slot, "err", err)
		ps.again(cl.Until)
	}
}

// leaveIndex removes the shard attribute so a finished item leaves the sparse pending index.
func (w *Worker) leaveIndex(ctx context.Context, key Key) {
	c := w.cfg
	var cond strings.Builder
	names := map[string]string{"#s": c.ShardAttr}
	for i, k := range keysSorted(key) {
		if i > 0 {
			cond.WriteString(" AND ")
		}
		n := "#k" + strconv.Itoa(i)
		names[n] = k
		cond.WriteString("attribute_exists(" + n + ")")
	}
	_, err := c.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.Table), Key: key, UpdateExpression: aws.String("REMOVE #s"),
		ConditionExpression: aws.String(cond.String()), ExpressionAttributeNames: names,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		c.Logger.Warn("dynapart: remove the item from the pending index", "err", err)
	}
}

// isValidation reports a request DynamoDB refuses as invalid (ValidationException): retrying the
// same write cannot succeed.
func isValidation(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
}

func keysSorted(k Key) []string { return slices.Sorted(maps.Keys(k)) }

// claimContext cancels with ErrClaimExpiring at the given time by the worker's clock.
func (w *Worker) claimContext(parent context.Context, at time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	d := at.Sub(w.cfg.Clock.Now())
	if d <= 0 {
		cancel(ErrClaimExpiring)
		return ctx, func() { cancel(nil) }
	}
	if _, real := w.cfg.Clock.(realClock); real {
		t := time.AfterFunc(d, func() { cancel(ErrClaimExpiring) })
		return ctx, func() { t.Stop(); cancel(nil) }
	}
	timer := w.cfg.Clock.After(d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-timer:
			cancel(ErrClaimExpiring)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil); <-done }
}

func runHandler(ctx context.Context, h Handler, item Item) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return h(ctx, item)
}

// backoff is base * 2^(attempt-1) with +-20% jitter, at most limit.
func backoff(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		if d > limit/2 {
			d = limit // doubling would pass the limit (or overflow)
			break
		}
		d *= 2
	}
	d = min(d, limit)
	f := float64(d) * (0.8 + rand.Float64()*0.4) // ±20% jitter
	if f >= math.MaxInt64 {
		return math.MaxInt64 // d + 20% of a limit near the largest Duration
	}
	return max(time.Duration(f), 0)
}

func (w *Worker) setState(slot int, token int64, state string) {
	w.mu.Lock()
	w.slot, w.token, w.state = slot, token, state
	w.mu.Unlock()
}

func (w *Worker) itemEvent(o Outcome, key Key, slot, attempt int, took time.Duration) {
	if f := w.cfg.Hooks.OnItem; f != nil {
		f(ItemEvent{Outcome: o, Key: key, Slot: slot, Attempt: attempt, Duration: took})
	}
}

func (w *Worker) leaseEvent(kind string, l *lock.Lease) {
	if f := w.cfg.Hooks.OnLease; f != nil {
		f(LeaseEvent{Kind: kind, Slot: l.Slot(), Token: l.Token(), TookOver: l.TookOver()})
	}
}
