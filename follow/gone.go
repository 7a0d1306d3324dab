package follow

import (
	"errors"

	"github.com/dynapart/dynapart/lock"
)

// A shard the stream no longer lists was trimmed away with all its records: DynamoDB closes a
// shard every few hours (its child takes the writes after it) and drops it once its last record
// is older than the retention. Its child is then listed without its parent. When the group had
// not read the parent to its end (its lease is not finished), the records after its checkpoint
// are lost with it, as a trimmed checkpoint's are.

// parentGone checks, once per run, the lease of a parent shard the stream no longer lists, before
// its child is read: true when nothing was lost (the group finished it, or never read it: its
// records came before the group's pass, which scanned what they held). A parent the group had not
// finished is a *TrimmedError, unless the caller's rescan covers the loss (ReaderConfig.Rescanned):
// then its lease is marked finished, so that no later reader meets it again. false without an
// error: another reader holds the parent's lease; look again later.
func (ru *run) parentGone(parent string) (bool, error) {
	if ru.goneDone[parent] {
		return true, nil
	}
	name := ShardMutex(ru.r.cfg.Group, parent)
	st, err := ru.r.cfg.Locks.MutexState(ru.ctx, name)
	switch {
	case err != nil:
		return false, err
	case !st.Exists || st.Finished:
		ru.goneDone[parent] = true
		return true, nil
	case !ru.r.rescanCovers():
		return false, &TrimmedError{Shard: parent, Checkpoint: st.Checkpoint,
			Reason: "the shard is gone from the stream (closed and trimmed away) before the group read it to its end"}
	}
	ok, err := ru.retire(parent, st.Checkpoint)
	if ok {
		ru.goneDone[parent] = true
	}
	return ok, err
}

// retire marks a gone shard's lease finished, with its checkpoint as it was.
func (ru *run) retire(shard, checkpoint string) (bool, error) {
	m := ru.r.cfg.Locks.NewMutex(ShardMutex(ru.r.cfg.Group, shard))
	ok, err := m.TryLock(ru.ctx)
	switch {
	case errors.Is(err, lock.ErrGroupFinished):
		return true, nil
	case err != nil || !ok:
		return false, err
	}
	l := &shardLease{r: ru.r, shard: shard, lease: m.Lease(), checkpoint: checkpoint}
	done, err := l.finish(ru.ctx)
	if done {
		ru.r.log.Warn("follow: a shard gone from the stream before the group read it to its end is marked finished (the caller's rescan covers its records)",
			"shard", shard, "checkpoint", checkpoint)
	}
	return done, err
}
