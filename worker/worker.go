package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dynapart/dynapart/follow"
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
	budget  budgetState // the group's capacity budget, as this worker records and reports it

	mu        sync.Mutex
	slot      int
	token     int64
	state     State
	scanner   *scan.Scanner
	rcuDone   float64
	reader    *follow.Reader // the stream's reader while the worker follows it (follow.go)
	followRCU float64        // read units of the items the stream's records named (FollowStats.RCU)
	itemRCU   float64        // read units of every consistent read of an item (readItem), in Stats.RCU
	ledger    Ledger
	ledgerWCU float64 // WCU and RCU of the ledgers of earlier Runs (replaced in prepare), in Stats
	ledgerRCU float64
	scope     string            // ClaimRequest.Scope of every claim, see claimScope
	gate      *ledger.WriteGate // the ledger's writes pass through it (Config.WriteRate)
	// warnedPartition: the warning that no item read has PartitionAttr was logged (once a Run).
	warnedPartition atomic.Bool
	// keyedRefused: DynamoDB refused a keyed pass's read for good (no dynamodb:BatchGetItem on the
	// table): once-jobs rescan their share for the items left (see keyedpass.go).
	keyedRefused atomic.Bool
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

// runState is where Run is between slots.
type runState int

const (
	// runStandby: waiting as a hot standby until a slot is free. Run starts here, and comes back
	// when its lease is lost or the group is resized.
	runStandby runState = iota
	// runHelping: a once-worker whose slot is finished takes any free, unfinished slot before it
	// exits, without waiting for one (see acquire).
	runHelping
	// runFinished: no slot is left to work on; Run returns nil.
	runFinished
)

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
	defer w.flushUsage(e)
	if err := w.recordBudget(ctx, e); err != nil {
		return err
	}
	var stopAt time.Time
	if dl, ok := ctx.Deadline(); ok {
		stopAt = dl.Add(-w.cfg.DeadlineMargin)
	}
	for state := runStandby; state != runFinished; {
		lease, err := w.takeSlot(ctx, e, state, stopAt)
		switch {
		case err != nil:
			return err
		case lease == nil:
			state = runFinished
			continue
		}
		if err := w.recordBudget(ctx, e); err != nil {
			w.releaseRefused(lease)
			return err
		}
		end, err := w.runSlot(ctx, e, lease, h, stopAt)
		if err != nil {
			return err
		}
		e.joined = true // the group exists: later acquisitions join it at its current n
		if state, err = w.afterSlot(ctx, end, stopAt); err != nil {
			return err
		}
	}
	return nil
}

// takeSlot takes the next slot in state (runStandby or runHelping). It returns no lease and no
// error when Run is finished: every slot of the group is finished, or, helping, no slot is free.
func (w *Worker) takeSlot(ctx context.Context, e *env, state runState, stopAt time.Time) (*lock.Lease, error) {
	log := w.cfg.Logger
	w.setState(-1, 0, StateStandby)
	acquireCtx, cancel := w.untilStop(ctx, stopAt)
	lease, err := w.acquire(acquireCtx, e, state)
	stopped := acquireCtx.Err() != nil
	cancel()
	switch {
	case errors.Is(err, lock.ErrGroupFinished) && w.stats.leases.Load() == 0: // this Run held no slot
		w.setState(-1, 0, StateFinished)
		log.Info("dynapart: every slot of the group is finished: nothing to do (a finished once-group does not pass again; "+
			"items redriven, reset or added since are handled by a new group: Config.Group, --group)", "group", w.cfg.Group)
		return nil, nil
	case errors.Is(err, lock.ErrGroupFinished):
		w.setState(-1, 0, StateFinished)
		log.Info("dynapart: every slot of the group is finished", "group", w.cfg.Group)
		return nil, nil
	case state == runHelping && errors.Is(err, lock.ErrNoFreeSlot):
		w.setState(-1, 0, StateFinished)
		log.Info("dynapart: no free unfinished slot left: every slot is finished or held by a live worker", "group", w.cfg.Group)
		return nil, nil
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil && stopped:
		return nil, errStoppedBeforeDeadline
	case err != nil:
		return nil, err
	}
	w.stats.leases.Add(1)
	if lease.TookOver() {
		w.stats.takeovers.Add(1)
	}
	w.leaseEvent(LeaseAcquired, lease)
	log.Info("dynapart: slot acquired", "group", w.cfg.Group, "slot", lease.Slot(), "token", lease.Token(),
		"took_over", lease.TookOver(), "resuming", lease.Checkpoint() != "")
	return lease, nil
}

// errStoppedBeforeDeadline is what Run returns when it stops at the deadline margin.
var errStoppedBeforeDeadline = fmt.Errorf("dynapart: stopped before the deadline: %w", context.DeadlineExceeded)

// afterSlot is Run's state after a slot ended so: a resize takes a slot again under the new
// plan, a once-worker whose slot is finished helps, and a slot whose lease was lost goes back
// to standby unless Run is stopping (ctx ended, or the deadline margin passed).
func (w *Worker) afterSlot(ctx context.Context, end slotEnd, stopAt time.Time) (runState, error) {
	switch {
	case end == slotReplan:
		return runStandby, nil
	case end == slotFinished && w.cfg.Once:
		return runHelping, nil // look for another slot to finish before exiting
	case ctx.Err() != nil:
		return runStandby, ctx.Err()
	case !stopAt.IsZero() && !w.cfg.Clock.Now().Before(stopAt):
		return runStandby, errStoppedBeforeDeadline
	}
	return runStandby, nil // the lease was lost
}

// acquire waits as a hot standby for a slot, or, when helping (a once-worker whose slot is
// finished), makes one round over every slot and returns lock.ErrNoFreeSlot when none is free
// and every holder of an unfinished slot is alive (help).
func (w *Worker) acquire(ctx context.Context, e *env, state runState) (*lock.Lease, error) {
	opts := []lock.AcquireOption{lock.WithGroupMeta(e.meta), lock.WithGroupMetaDefaults(e.metaDefaults)}
	// A group that exists is joined at its current n (re-read every round, so a standby follows a
	// resize); prepare has refused a Workers that disagrees with it.
	n := w.cfg.Workers
	if e.joined {
		n = 0
	}
	take := e.locks.AcquireSlot
	if state == runHelping {
		take = func(ctx context.Context, group string, n int, opts ...lock.AcquireOption) (*lock.Lease, error) {
			return w.help(ctx, e, func() (*lock.Lease, error) { return e.locks.TryAcquireSlot(ctx, group, n, opts...) })
		}
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
