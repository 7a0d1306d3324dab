package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// Worker runs the lease -> scan -> claim -> handle -> complete loop for one slot at a time.
type Worker struct {
	cfg     Config
	running atomic.Bool
	stats   counters
	pause   *pauseState // the group's pause flag while a slot is held

	mu      sync.Mutex
	slot    int
	token   int64
	state   State
	scanner *scan.Scanner
	rcuDone float64
	ledger  Ledger
	scope   string            // ClaimRequest.Scope of every claim, see claimScope
	gate    *ledger.WriteGate // the ledger's writes pass through it (Config.WriteRate)
}

// New validates cfg, fills in its defaults and returns a Worker. It does no I/O: tables are
// checked when Run starts. An invalid field gives a *ConfigError naming it.
func New(cfg Config) (*Worker, error) {
	d := cfg.withDefaults()
	if err := d.validate(); err != nil {
		return nil, err
	}
	return &Worker{cfg: d, slot: -1, state: StateIdle, scope: claimScope(d), pause: newPauseState(), gate: ledger.NewWriteGate(d.WriteRate)}, nil
}

// Config returns the configuration with its defaults filled in.
func (w *Worker) Config() Config { return w.cfg }

// env is what Run prepares once: the table's key, the lock client and the ledger.
type env struct {
	keyAttrs []string
	// source is the source table as the worker described it when it started (at describedAt);
	// passes give it to their scanners while it is fresh (see sourceDescription).
	source      *types.TableDescription
	describedAt time.Time
	locks       *lock.Client
	ledger      Ledger
	// meta and metaDefaults are the group settings every acquisition records or compares (see
	// groupMeta); total is the group's segment count; joined says the group exists, so
	// acquisitions join it at its current n (see joinGroup).
	meta, metaDefaults map[string]string
	total              int
	joined             bool
	n                  int // the group's n when Run started (Workers for a new group)
}

// Run takes a slot (waiting as a hot standby while all are held), processes the slot's share and,
// with Once, goes on with any other free, unfinished slot (without waiting for one), returning nil
// when no slot is left that is neither finished nor held by a live worker (or at once when every
// slot of the group is finished). Without Once it processes continuously until ctx ends. It returns ctx.Err() when
// stopped by ctx (after draining handlers, releasing unfinished claims, saving the checkpoint and
// releasing the lease), and only after every goroutine it started has returned.
func (w *Worker) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return &ConfigError{Pkg: "dynapart", Field: "handler", Reason: "required"}
	}
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunTwice
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
	// helping: a once-worker that finished a slot takes any free, unfinished slot before it
	// exits, without waiting as a standby (see acquire).
	helping := false
	for {
		w.setState(-1, 0, StateStandby)
		acquireCtx, cancel := w.untilStop(ctx, stopAt)
		lease, err := w.acquire(acquireCtx, e, helping)
		stopped := acquireCtx.Err() != nil
		cancel()
		switch {
		case errors.Is(err, lock.ErrGroupFinished):
			w.setState(-1, 0, StateFinished)
			log.Info("dynapart: every slot of the group is finished", "group", w.cfg.Group)
			return nil
		case helping && errors.Is(err, lock.ErrNoFreeSlot):
			w.setState(-1, 0, StateFinished)
			log.Info("dynapart: no free unfinished slot left: every slot is finished or held by a live worker", "group", w.cfg.Group)
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
		w.leaseEvent(LeaseAcquired, lease)
		log.Info("dynapart: slot acquired", "group", w.cfg.Group, "slot", lease.Slot(), "token", lease.Token(),
			"took_over", lease.TookOver(), "resuming", lease.Checkpoint() != "")

		end, err := w.runSlot(ctx, e, lease, h, stopAt)
		if err != nil {
			return err
		}
		e.joined = true // the group exists: later acquisitions join it at its current n
		switch {
		case end.replan:
			helping = false
			continue
		case end.finished && w.cfg.Once:
			helping = true // look for another slot to finish before exiting
			continue
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

// acquire waits as a hot standby for a slot, or, when helping (a once-worker whose slot is
// finished), makes one round over every slot and returns lock.ErrNoFreeSlot when none is free.
func (w *Worker) acquire(ctx context.Context, e *env, helping bool) (*lock.Lease, error) {
	opts := []lock.AcquireOption{lock.WithGroupMeta(e.meta), lock.WithGroupMetaDefaults(e.metaDefaults)}
	// A group that exists is joined at its current n (re-read every round, so a standby follows a
	// resize); prepare has refused a Workers that disagrees with it.
	n := w.cfg.Workers
	if e.joined {
		n = 0
	}
	take := e.locks.AcquireSlot
	if helping {
		take = e.locks.TryAcquireSlot
	}
	l, err := take(ctx, w.cfg.Group, n, opts...)
	if n != 0 && w.resizedSinceCreated(ctx, e, err) {
		// Workers was what the group should be created with, and it was, then resized.
		e.joined = true
		return take(ctx, w.cfg.Group, 0, opts...)
	}
	return l, err
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
	locks, lockErr := w.lockClient()
	r := w.readStartThroughOutage(ctx, locks)
	if r.sourceErr != nil {
		return nil, r.sourceErr
	}
	keyAttrs := scan.KeyAttributes(r.source.KeySchema)
	if c.Mode == scan.ModeIndex {
		found := false
		for _, g := range r.source.GlobalSecondaryIndexes {
			found = found || aws.ToString(g.IndexName) == c.IndexName
		}
		if !found {
			return nil, &ConfigError{Pkg: "dynapart", Field: "IndexName", Reason: fmt.Sprintf("table %q has no index %q (create it with scan.CreatePendingIndex or `dynapart init --index`)", c.Table, c.IndexName)}
		}
	}
	if r.leaseErr != nil {
		return nil, leaseTableErr(r.leaseErr)
	}
	l, err := w.newLedger(r, keyAttrs)
	if err != nil {
		return nil, err
	}
	if lockErr != nil {
		return nil, lockErr
	}
	w.mu.Lock()
	w.ledger = l
	w.mu.Unlock()
	e := &env{keyAttrs: keyAttrs, source: r.source, describedAt: c.Clock.Now(), locks: locks, ledger: l}
	if r.groupErr != nil {
		return nil, r.groupErr
	}
	if err := w.joinGroup(e, r.group); err != nil {
		return nil, err
	}
	return e, nil
}

// newLedger is the worker's ledger over the source table's key attributes: the ledger table
// described in r, or the inline ledger.
func (w *Worker) newLedger(r *startReads, keyAttrs []string) (Ledger, error) {
	c := w.cfg
	if c.Ledger == LedgerTable {
		if r.ledgerErr != nil {
			return nil, r.ledgerErr
		}
		if err := ledger.CheckTableSchema(c.LedgerTable, r.ledger); err != nil {
			return nil, &ConfigError{Pkg: "dynapart", Field: "LedgerTable", Reason: err.Error(), Err: err}
		}
		return ledger.NewTable(c.Client, c.LedgerTable, c.Job, c.Table, keyAttrs, w.ledgerOptions()...)
	}
	opts := append(w.ledgerOptions(), ledger.WithPrefix(c.AttrPrefix))
	if c.Mode == scan.ModeIndex {
		opts = append(opts, ledger.WithRemoveOnDone(c.ShardAttr))
	}
	return ledger.NewInline(c.Client, c.Table, keyAttrs, opts...)
}

// ledgerOptions are the ledger settings of every worker ledger: the write gate, the clock skew
// claims are padded with, and the complete-only audit.
func (w *Worker) ledgerOptions() []ledger.Option {
	opts := []ledger.Option{ledger.WithWriteGate(w.gate), ledger.WithMaxClockSkew(w.cfg.MaxClockSkew)}
	if w.cfg.CompleteOnlyAudit {
		opts = append(opts, ledger.WithCompleteOnlyAudit())
	}
	return opts
}

// lockClient is the worker's client of the lease table.
func (w *Worker) lockClient() (*lock.Client, error) {
	c := w.cfg
	return lock.New(c.Client, c.LeaseTable,
		lock.WithOwner(c.Owner), lock.WithLeaseTTL(c.LeaseTTL), lock.WithHeartbeat(c.Heartbeat),
		lock.WithMaxClockSkew(c.MaxClockSkew), lock.WithPollInterval(c.StandbyPoll),
		lock.WithClock(c.Clock), lock.WithLogger(c.Logger))
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
		return nil, &ConfigError{Pkg: "dynapart", Field: field, Reason: fmt.Sprintf("table %q does not exist (create it with `dynapart init`)", table), Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("dynapart: describe table %q: %w", table, err)
	}
	return out.Table, nil
}

// slotEnd is how a slot's run ended: finished (the slot was marked finished) or replan (the group
// was resized: take a slot again under the new plan).
type slotEnd struct{ finished, replan bool }

// runSlot works on one held lease until the slot's share is finished (once), ctx ends, the
// deadline nears, the lease is lost or the group is resized. It always releases the lease (if
// still held) before it returns.
func (w *Worker) runSlot(ctx context.Context, e *env, lease *lock.Lease, h Handler, stopAt time.Time) (slotEnd, error) {
	log := w.cfg.Logger.With("slot", lease.Slot(), "token", lease.Token())
	w.setState(lease.Slot(), lease.Token(), StateWorking)
	defer w.release(ctx, lease, log)
	// A resize stops the slot's work as a shutdown would (see replan.go).
	sctx, replan := context.WithCancelCause(ctx)
	defer replan(nil)
	stopWatch := w.watchGroup(e, lease, func() {
		log.Info("dynapart: the group was resized: no new claims, saving the checkpoint, taking a slot under the new plan")
		replan(errReplan)
	})
	defer stopWatch()
	finished, err := w.workSlot(sctx, e, lease, h, stopAt, log)
	if err == nil && finished && w.steals() {
		// Keep the finished slot's lease (it fences what the thief writes) while taking units
		// from slots still working (see steal.go). A one-slot plan's finish released the lease:
		// there is nothing to steal, and steal returns at once.
		w.steal(sctx, e, lease, h, stopAt, log)
	}
	end := slotEnd{finished: finished, replan: ctx.Err() == nil && errors.Is(context.Cause(sctx), errReplan)}
	if errors.Is(err, errReplan) {
		end.replan, err = true, nil
	}
	return end, err
}

// startSlot reads the lease's plan and the checkpoint the slot resumes from: its own, or, when
// the lease is of a newer plan than that checkpoint, one composed from the group's once the old
// plan has stopped (see replan.go). A read that fails is retried by taking a slot again
// (errReplan) after a pause.
func (w *Worker) startSlot(ctx context.Context, e *env, lease *lock.Lease, stopAt time.Time, log *slog.Logger) (scan.Plan, slotCheckpoint, error) {
	cp, derr := decodeSlotCheckpoint(lease.Checkpoint())
	if derr != nil {
		log.Warn("dynapart: ignoring the slot's checkpoint, rescanning the share", "err", derr)
		cp = slotCheckpoint{}
	}
	plan, err := w.leasePlan(ctx, e, lease)
	if errors.Is(err, errReplan) {
		log.Info("dynapart: the group was resized since the slot was taken: taking a slot under the new plan")
	}
	if err == nil && cp.epoch < lease.Epoch() {
		if err = w.waitOldPlan(ctx, e, lease); err == nil {
			if cp, err = w.adoptPlan(ctx, e, lease, plan, cp); err == nil {
				err = w.saveCheckpoint(ctx, lease, cp.encode())
			}
		}
		if err == nil {
			log.Info("dynapart: slot taken under the group's new plan", "epoch", cp.epoch, "slots", cp.n, "pass", cp.pass)
		}
	}
	if err == nil && cp.run == 0 && w.marksUnits(plan) {
		// The pass's unit markers are named by the token that started it (see steal.go): saved
		// at once, so that thieves and the slot's next holder use the same markers.
		cp.epoch, cp.n, cp.run = lease.Epoch(), plan.Slots, lease.Token()
		err = w.saveCheckpoint(ctx, lease, cp.encode())
	}
	if err != nil && !errors.Is(err, errReplan) && ctx.Err() == nil && lease.Context().Err() == nil {
		log.Warn("dynapart: reading the group's plan failed; taking a slot again", "err", err)
		w.wait(ctx, lease, stopAt, failedPassBackoff)
		err = errReplan
	}
	cp.epoch, cp.n = lease.Epoch(), plan.Slots
	return plan, cp, err
}

// workSlot is runSlot's loop of passes.
func (w *Worker) workSlot(ctx context.Context, e *env, lease *lock.Lease, h Handler, stopAt time.Time, log *slog.Logger) (finished bool, err error) {
	plan, cp, err := w.startSlot(ctx, e, lease, stopAt, log)
	if err != nil {
		if ctx.Err() != nil || lease.Context().Err() != nil {
			return false, nil
		}
		return false, err
	}
	var out outage
	for {
		// Paused: no pass starts (a pass in progress stops claiming, see pauseState).
		if !w.waitResumed(ctx, lease, stopAt) {
			return false, nil
		}
		res, err := w.runPass(ctx, e, lease, h, plan, cp, stopAt)
		cp = res.cp
		stopped := ctx.Err() != nil || lease.Context().Err() != nil || res.deadline
		if res.unsaved && (stopped || err != nil) {
			// The pass left its checkpoint to the write that marks the slot finished, which
			// does not come now: save it on its own.
			_ = w.saveCheckpoint(ctx, lease, cp.encode())
			res.unsaved = false
		}
		switch {
		case stopped:
			return false, nil // Run decides what to return
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
			if !w.wait(ctx, lease, stopAt, backoff(failedPassBackoff, maxFailedPassBackoff, out.failures)) {
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
				f := slotFinish{cp: cp, unsaved: res.unsaved, release: !w.stealsIn(plan)}
				return w.finishWhenResumed(ctx, lease, stopAt, f, log)
			}
			if res.nextDue > 0 && res.nextDue < wait {
				wait = res.nextDue
			}
		}
		cp = cp.next(lease.Token())
		if err := w.saveCheckpoint(ctx, lease, cp.encode()); err != nil {
			return false, nil
		}
		if !w.wait(ctx, lease, stopAt, wait) {
			return false, nil
		}
	}
}

// The backoff between failed passes of one slot holder (until OutageTimeout gives up).
const (
	failedPassBackoff    = time.Second
	maxFailedPassBackoff = 30 * time.Second
)

// release releases the lease when it is still held, and reports a lost one.
func (w *Worker) release(ctx context.Context, lease *lock.Lease, log *slog.Logger) {
	cctx, cancel := w.leaseWriteContext(ctx)
	defer cancel()
	if err := lease.Release(cctx); err != nil {
		if errors.Is(err, lock.ErrLeaseLost) {
			w.stats.leasesLost.Add(1)
			w.leaseEvent(LeaseLost, lease)
			log.Warn("dynapart: lease lost", "cause", context.Cause(lease.Context()))
			return
		}
		log.Error("dynapart: release lease", "err", err)
		return
	}
	w.leaseEvent(LeaseReleased, lease)
}

// slotFinish is how workSlot ends a slot whose share is done: cp is its last checkpoint,
// unsaved that the pass left it to this write, release that nothing follows on the lease (a
// one-slot plan, or no stealing), so the write that marks the slot finished releases it too.
type slotFinish struct {
	cp               slotCheckpoint
	unsaved, release bool
}

// finishWhenResumed marks the slot finished with its last checkpoint once the group is not paused
// (a paused once-worker does not mark its slot finished until resumed). An unsaved checkpoint is
// saved on its own before a pause is waited out, so a stop or crash during the pause keeps it.
func (w *Worker) finishWhenResumed(ctx context.Context, lease *lock.Lease, stopAt time.Time, f slotFinish, log *slog.Logger) (finished bool, err error) {
	if w.pause.flagged() {
		if f.unsaved {
			_ = w.saveCheckpoint(ctx, lease, f.cp.encode())
			f.unsaved = false
		}
		if !w.waitResumed(ctx, lease, stopAt) {
			return false, nil
		}
	}
	return w.finish(ctx, lease, f, log)
}

// finish marks the slot finished and saves its last checkpoint in the same write, which also
// releases the lease when f.release (once mode, after a clean pass); a lost lease is a stop. When
// both the write and its resend fail, the checkpoint is the pass's last periodic one: the slot's
// next holder reads the share's tail again (its items are done, so only reads are repeated).
func (w *Worker) finish(ctx context.Context, lease *lock.Lease, f slotFinish, log *slog.Logger) (finished bool, err error) {
	if err := w.finishWrite(ctx, lease, f); err != nil {
		if errors.Is(err, lock.ErrLeaseLost) {
			return false, nil
		}
		if !f.release {
			_ = w.saveCheckpoint(ctx, lease, f.cp.encode()) // the next holder resumes at the pass's end
		}
		return false, fmt.Errorf("dynapart: mark slot %d finished: %w", lease.Slot(), err)
	}
	w.leaseEvent(LeaseFinished, lease)
	log.Info("dynapart: slot finished")
	return true, nil
}

// finishWrite sends finish's write. A FinishAndRelease that fails in transit (it may have landed
// with its answer lost) is sent once more by Release, which repeats the same write.
func (w *Worker) finishWrite(ctx context.Context, lease *lock.Lease, f slotFinish) error {
	cctx, cancel := w.leaseWriteContext(ctx)
	defer cancel()
	if !f.release {
		return lease.FinishWithCheckpoint(cctx, f.cp.encode())
	}
	err := lease.FinishAndRelease(cctx, f.cp.encode())
	if err == nil || errors.Is(err, lock.ErrLeaseLost) {
		return err
	}
	rctx, rcancel := w.leaseWriteContext(ctx)
	defer rcancel()
	if lease.Release(rctx) == nil {
		return nil
	}
	return err
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

// saveCheckpoint saves the slot's checkpoint; a failure other than a lost lease is logged.
func (w *Worker) saveCheckpoint(ctx context.Context, lease *lock.Lease, v string) error {
	cctx, cancel := w.leaseWriteContext(ctx)
	defer cancel()
	err := lease.SaveCheckpoint(cctx, v)
	if err != nil && !errors.Is(err, lock.ErrLeaseLost) {
		w.cfg.Logger.Warn("dynapart: save checkpoint", "slot", lease.Slot(), "err", err)
	}
	return err
}

func (w *Worker) setState(slot int, token int64, state State) {
	w.mu.Lock()
	w.slot, w.token, w.state = slot, token, state
	w.mu.Unlock()
}

func (w *Worker) itemEvent(o Outcome, key Key, slot, attempt int, took time.Duration) {
	if f := w.cfg.Hooks.OnItem; f != nil {
		f(ItemEvent{Outcome: o, Key: key, Slot: slot, Attempt: attempt, Duration: took})
	}
}

func (w *Worker) leaseEvent(kind LeaseEventKind, l *lock.Lease) {
	if f := w.cfg.Hooks.OnLease; f != nil {
		f(LeaseEvent{Kind: kind, Slot: l.Slot(), Token: l.Token(), TookOver: l.TookOver()})
	}
}

// The defaults of Config.WriteTimeout and Config.LeaseWriteTimeout.
const (
	DefaultWriteTimeout      = 30 * time.Second
	DefaultLeaseWriteTimeout = 10 * time.Second
)

// leaseWriteContext is for a lease write that must outlive ctx.
func (w *Worker) leaseWriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), w.cfg.LeaseWriteTimeout)
}
