package worker

import (
	"time"

	"github.com/dynapart/dynapart/follow"
)

// FollowStats is what a worker following the table's stream did (Config.Follow).
type FollowStats struct {
	// Records counts the stream records the worker read.
	Records int64 `json:"records"`
	// Handled counts the item versions the worker handled from the stream's records (done or
	// dead-lettered at the version).
	Handled int64 `json:"handled"`
	// Superseded counts records whose version was handled already when the worker got to them
	// (by a pass, a newer record, or a reader before a takeover), or that a later record of the
	// same item in the same batch superseded.
	Superseded int64 `json:"superseded"`
	// Unchanged counts records of writes that changed no content (the inline ledger's own writes,
	// rewrites of the same values that kept the item's state).
	Unchanged int64 `json:"unchanged"`
	// Deleted counts records of deleted items (and candidates found deleted): nothing to handle.
	Deleted int64 `json:"deleted"`
	// Rescans counts the passes made because the stream no longer held a shard's records after
	// its checkpoint (older than the stream's retention).
	Rescans int64 `json:"rescans"`
	// RCU is the read capacity of the consistent reads of the items the records named.
	RCU float64 `json:"rcu"`
	// Lag is the age of the oldest record read and not yet resolved, over the shards this worker
	// reads; 0 when it is caught up.
	Lag time.Duration `json:"lag_ns"`
	// Shards are the stream's shards this worker reads now.
	Shards []follow.ShardStat `json:"shards,omitempty"`
}

// followStats is the worker's FollowStats; nil unless it follows the stream.
func (w *Worker) followStats() *FollowStats {
	if !w.cfg.Follow {
		return nil
	}
	s := &w.stats
	out := &FollowStats{Records: s.followRecords.Load(), Handled: s.followHandled.Load(),
		Superseded: s.followSuperseded.Load(), Unchanged: s.followUnchanged.Load(), Deleted: s.followDeleted.Load(), Rescans: s.followRescans.Load()}
	w.mu.Lock()
	r := w.reader
	out.RCU = w.followRCU
	w.mu.Unlock()
	if r != nil {
		out.Shards = r.Stats()
		for _, sh := range out.Shards {
			out.Lag = max(out.Lag, sh.Lag)
		}
	}
	return out
}

// addItemRCU adds the read units of a consistent read of an item (readItem) to Stats.RCU, and
// to FollowStats.RCU (which a worker that follows shows).
func (w *Worker) addItemRCU(u float64) {
	w.mu.Lock()
	w.itemRCU += u
	w.followRCU += u
	w.mu.Unlock()
}
