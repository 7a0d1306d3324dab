package follow

import (
	"slices"
	"sync"
	"time"
)

// ShardStat is one shard as this Reader knows it: every shard of its last listing of the stream,
// and any shard it reads.
type ShardStat struct {
	Shard, Parent string
	// Owner is this reader's lock owner while it holds the shard's lease, else "".
	Owner string
	// Position is the last checkpoint (sequence number) this reader saved or found on the shard's
	// lease; "" when none is known.
	Position string
	// Finished says the shard is closed and read to its end (by this reader or another).
	Finished bool
	// Lag is the age of the oldest record delivered and not yet Done (by its
	// ApproximateCreationDateTime); 0 when no batch of the shard is waiting.
	Lag time.Duration
	// Records counts the records this reader delivered from the shard (again after a takeover).
	Records int64
}

// statBook keeps the ShardStats; the look loop and the shards' goroutines write it, Stats reads it.
type statBook struct {
	clock Clock

	mu     sync.Mutex
	order  []string // the last listing, in lineage order
	shards map[string]*shardStats
}

type shardStats struct {
	ShardStat
	waiting time.Time // creation time of the oldest record of the batch waiting for Done (zero: none)
	held    bool
}

func newStatBook(clk Clock) *statBook { return &statBook{clock: clk, shards: map[string]*shardStats{}} }

// entry returns the shard's stats, made on first use. Callers hold mu.
func (b *statBook) entry(id string) *shardStats {
	st, ok := b.shards[id]
	if !ok {
		st = &shardStats{ShardStat: ShardStat{Shard: id}}
		b.shards[id] = st
	}
	return st
}

// update applies f to the shard's stats under the lock.
func (b *statBook) update(id string, f func(st *shardStats)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b.entry(id))
}

// listed records a listing of the stream: shards gone from it are forgotten unless held.
func (b *statBook) listed(shards []shard) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.order = b.order[:0]
	seen := make(map[string]bool, len(shards))
	for _, s := range shards {
		b.entry(s.id).Parent = s.parent
		b.order = append(b.order, s.id)
		seen[s.id] = true
	}
	for id, st := range b.shards {
		if !seen[id] && !st.held {
			delete(b.shards, id)
		}
	}
}

func (b *statBook) took(id, owner, checkpoint string) {
	b.update(id, func(st *shardStats) { st.held, st.Owner, st.Position = true, owner, checkpoint })
}

func (b *statBook) dropped(id string, finished bool) {
	b.update(id, func(st *shardStats) {
		st.held, st.Owner, st.waiting = false, "", time.Time{}
		st.Finished = st.Finished || finished
	})
}

func (b *statBook) finished(id string) { b.update(id, func(st *shardStats) { st.Finished = true }) }

func (b *statBook) delivered(bt *Batch) {
	b.update(bt.Shard, func(st *shardStats) {
		st.Records += int64(len(bt.Records))
		st.waiting = bt.oldest()
	})
}

func (b *statBook) batchDone(id string) {
	b.update(id, func(st *shardStats) { st.waiting = time.Time{} })
}

func (b *statBook) saved(id, checkpoint string) {
	b.update(id, func(st *shardStats) { st.Position = checkpoint })
}

// snapshot is Stats: the listing's shards in lineage order, then any other shard held.
func (b *statBook) snapshot() []ShardStat {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	ids := slices.Clone(b.order)
	inOrder := make(map[string]bool, len(ids))
	for _, id := range ids {
		inOrder[id] = true
	}
	var extra []string
	for id := range b.shards {
		if !inOrder[id] {
			extra = append(extra, id)
		}
	}
	slices.Sort(extra)
	out := make([]ShardStat, 0, len(ids)+len(extra))
	for _, id := range append(ids, extra...) {
		st := b.shards[id]
		s := st.ShardStat
		if !st.waiting.IsZero() {
			s.Lag = max(now.Sub(st.waiting), 0)
		}
		out = append(out, s)
	}
	return out
}
