package follow

import (
	"context"
	"errors"
	"sync"

	"github.com/dynapart/dynapart/lock"
)

// run is one Run: the shards it reads, the shards it knows are finished, and the first error that
// stops it. The look loop takes shards; each shard taken is read by a goroutine of its own.
type run struct {
	r    *Reader
	fn   func(context.Context, *Batch) error
	ctx  context.Context // ends when the Run is to stop: the caller's ctx, or the first failure
	stop context.CancelCauseFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	reading  map[string]bool // shards a goroutine of this run reads
	finished map[string]bool // shards known to be finished (their lease says so)
	err      error           // the first failure

	// freeLooks counts, per shard, the looks in a row that saw it free while the run was at
	// MaxShards (see overflowLooks). Only the look loop uses it.
	freeLooks map[string]int
	// goneDone: parents no longer listed whose leases say nothing was lost (see parentGone). Only
	// the look loop uses it.
	goneDone map[string]bool
}

func newRun(ctx context.Context, r *Reader, fn func(context.Context, *Batch) error) *run {
	ctx, stop := context.WithCancelCause(ctx)
	return &run{r: r, fn: fn, ctx: ctx, stop: stop, reading: map[string]bool{},
		finished: map[string]bool{}, freeLooks: map[string]int{}, goneDone: map[string]bool{}}
}

// loop looks for shards to take every PollInterval until the run stops; a look that failed on a
// transient error is made again after a growing pause.
func (ru *run) loop() {
	failures := 0
	for ru.ctx.Err() == nil {
		pause := ru.r.cfg.PollInterval
		err := ru.look()
		if h := ru.r.hooks.looked; h != nil {
			h()
		}
		switch {
		case err == nil || ru.ctx.Err() != nil:
			failures = 0
		case transient(err):
			failures++
			pause = ru.r.backoff(failures)
			ru.r.log.Warn("follow: looking for shards failed, retrying", "err", err, "failures", failures, "retry_in", pause)
		default:
			ru.fail(err)
			return
		}
		if !ru.r.wait(ru.ctx, pause) {
			return
		}
	}
}

// look lists the stream's shards and takes those this run may read: readable by lineage, neither
// finished nor read already, within MaxShards (see consider).
func (ru *run) look() error {
	shards, err := listShards(ru.ctx, ru.r.cfg.Streams, ru.r.cfg.StreamARN)
	if err != nil {
		return err
	}
	ru.r.stats.listed(shards)
	listed := make(map[string]bool, len(shards))
	for _, s := range shards {
		listed[s.id] = true
	}
	for _, s := range shards { // parents first: a parent found finished frees its child in this look
		if ru.ctx.Err() != nil {
			return nil
		}
		if ru.isReading(s.id) || ru.isFinished(s.id) || !s.readable(listed, ru.isFinished) {
			continue
		}
		if s.parent != "" && !listed[s.parent] {
			if ok, err := ru.parentGone(s.parent); err != nil || !ok {
				return err
			}
		}
		if err := ru.consider(s); err != nil {
			return err
		}
	}
	return nil
}

// consider takes s at once while the run reads fewer than MaxShards shards; at MaxShards it only
// reads the shard's lease, and takes the shard once it has seen it free at overflowLooks looks in
// a row.
func (ru *run) consider(s shard) error {
	if !ru.atMax() {
		return ru.tryTake(s)
	}
	st, err := ru.r.cfg.Locks.MutexState(ru.ctx, ShardMutex(ru.r.cfg.Group, s.id))
	switch {
	case err != nil:
		return err
	case st.Finished:
		ru.markFinished(s.id)
	case st.Held:
		ru.freeLooks[s.id] = 0
	default:
		ru.freeLooks[s.id]++
		if ru.freeLooks[s.id] >= overflowLooks {
			ru.r.log.Info("follow: taking a shard nobody else took, beyond MaxShards", "shard", s.id,
				"max_shards", ru.r.cfg.MaxShards)
			return ru.tryTake(s)
		}
	}
	return nil
}

// tryTake makes one attempt at the shard's lease and starts reading the shard when it wins.
func (ru *run) tryTake(s shard) error {
	m := ru.r.cfg.Locks.NewMutex(ShardMutex(ru.r.cfg.Group, s.id))
	ok, err := m.TryLock(ru.ctx)
	switch {
	case errors.Is(err, lock.ErrGroupFinished):
		ru.markFinished(s.id)
		return nil
	case err != nil:
		return err
	case !ok:
		ru.freeLooks[s.id] = 0
		return nil
	}
	delete(ru.freeLooks, s.id)
	ru.start(s, m.Lease())
	return nil
}

// start reads the shard in a goroutine of its own, which releases the lease when it is done.
func (ru *run) start(s shard, l *lock.Lease) {
	ru.mu.Lock()
	ru.reading[s.id] = true
	ru.mu.Unlock()
	ru.r.stats.took(s.id, l.Owner(), l.Checkpoint())
	ru.r.log.Info("follow: reading shard", "shard", s.id, "parent", s.parent, "checkpoint", l.Checkpoint(),
		"took_over", l.TookOver())
	if h := ru.r.hooks.held; h != nil {
		h(s.id, true)
	}
	ru.wg.Go(func() {
		sr := newShardReader(ru, s, l)
		finished, err := sr.read()
		if !finished {
			sr.lease.release()
		}
		ru.mu.Lock()
		delete(ru.reading, s.id)
		ru.finished[s.id] = ru.finished[s.id] || finished
		ru.mu.Unlock()
		ru.r.stats.dropped(s.id, finished)
		if h := ru.r.hooks.held; h != nil {
			h(s.id, false)
		}
		if err != nil {
			ru.fail(err)
		}
	})
}

// fail records the run's first failure and stops the run. An error that is only the run's own end
// showing through is no failure.
func (ru *run) fail(err error) {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	if ru.err != nil || (ru.ctx.Err() != nil && isCancel(err)) {
		return
	}
	ru.err = err
	ru.stop(err)
}

func (ru *run) failure() error {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return ru.err
}

func (ru *run) atMax() bool {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return ru.r.cfg.MaxShards > 0 && len(ru.reading) >= ru.r.cfg.MaxShards
}

func (ru *run) isReading(id string) bool {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return ru.reading[id]
}

func (ru *run) isFinished(id string) bool {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return ru.finished[id]
}

func (ru *run) markFinished(id string) {
	ru.mu.Lock()
	ru.finished[id] = true
	ru.mu.Unlock()
	ru.r.stats.finished(id)
}
