package follow

import (
	"context"
	"errors"
	"time"

	"github.com/dynapart/dynapart/lock"
)

// shardLease is a shard held by this reader: its lock lease, whose checkpoint is the sequence
// number of the last record of the last batch Done. Every write through it is fenced on the
// lease's token, so a reader that lost the shard cannot move the next holder's checkpoint.
type shardLease struct {
	r          *Reader
	shard      string
	lease      *lock.Lease
	checkpoint string
	// ownCheckpoint: checkpoint was saved by this Reader, not found on the lease (see
	// ReaderConfig.Rescanned).
	ownCheckpoint bool
}

// writeTimeout bounds one lock write made on the way out (finish, release), when the run's
// context may already be over.
const writeTimeout = 10 * time.Second

// save stores seq as the shard's checkpoint. Transient errors are retried for as long as the lease
// lives (its expiry bounds the wait); a lost lease is errStop: the batch is read again by the
// shard's next holder.
func (l *shardLease) save(seq string) error {
	err := l.retry("save checkpoint", l.lease.Context(), func(ctx context.Context) error {
		return l.lease.SaveCheckpoint(ctx, seq)
	})
	if err != nil {
		return err
	}
	l.checkpoint, l.ownCheckpoint = seq, true
	l.r.stats.saved(l.shard, seq)
	if h := l.r.hooks.saved; h != nil {
		h(l.shard, seq)
	}
	return nil
}

// finish marks the shard finished (with its checkpoint) and releases it in one fenced write, so no
// reader reads it again and its children become readable. It reports false when the lease was lost
// first (the next holder reads to the end and finishes it) or the run ended before the write
// landed. A retry after a transport error sends the same write again (see lock.Lease.FinishAndRelease).
func (l *shardLease) finish(run context.Context) (bool, error) {
	err := l.retry("finish", run, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		return l.lease.FinishAndRelease(ctx, l.checkpoint)
	})
	if errors.Is(err, errStop) {
		return false, nil
	}
	if err == nil {
		l.r.log.Info("follow: shard read to its end", "shard", l.shard, "checkpoint", l.checkpoint)
	}
	return err == nil, err
}

// release gives the lease back so that another reader can take the shard at once. A lease already
// lost has nothing to give back; a failed release leaves the lease to expire.
func (l *shardLease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	err := l.lease.Release(ctx)
	switch {
	case err == nil:
		l.r.log.Info("follow: released shard", "shard", l.shard, "checkpoint", l.checkpoint)
	case errors.Is(err, lock.ErrLeaseLost):
		l.r.log.Info("follow: shard lease was lost", "shard", l.shard, "err", err)
	default:
		l.r.log.Warn("follow: releasing the shard failed; its lease expires instead", "shard", l.shard, "err", err)
	}
}

// retry calls write until it lands. A lost lease is errStop; transient errors are retried with a
// growing pause until alive ends (errStop); any other error is returned.
func (l *shardLease) retry(what string, alive context.Context, write func(ctx context.Context) error) error {
	for failures := 1; ; failures++ {
		err := write(alive)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, lock.ErrLeaseLost):
			l.r.log.Info("follow: shard lease lost", "shard", l.shard, "op", what, "err", err)
			return errStop
		case alive.Err() != nil:
			return errStop
		case !transient(err):
			return err
		}
		pause := l.r.backoff(failures)
		l.r.log.Warn("follow: lock write failed, retrying", "shard", l.shard, "op", what, "err", err,
			"failures", failures, "retry_in", pause)
		if !l.r.wait(alive, pause) {
			return errStop
		}
	}
}
