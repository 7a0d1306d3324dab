package status

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// Document is the status page's data: what `status --json` prints and /api/status serves. It
// keeps the fields of the plain `status --json` document (group, workers, meta, finished, slots)
// and adds the state of each slot, progress, item counts, throughput, ETA and dead letters.
// Fields that are not known are null, so clients must allow for them; fields are only added.
type Document struct {
	Group    string            `json:"group"`
	Workers  int               `json:"workers"`
	Epoch    int64             `json:"epoch"` // the plan epoch: +1 per 'dynapart scale'
	Meta     map[string]string `json:"meta,omitempty"`
	Finished bool              `json:"finished"`
	// Exists is false while the group has not started (no 'dynapart work' of it yet, or a typo):
	// only the page (--serve) shows such a group; status and status --json exit 2 naming it.
	Exists bool `json:"exists"`
	// Paused is the group's pause flag (dynapart pause / resume), PausedReason why: "operator"
	// (dynapart pause), "budget" (the group reached its budget); null when not paused (or paused
	// before reasons were kept).
	Paused       bool    `json:"paused"`
	PausedReason *string `json:"paused_reason"`
	// Budget is the group's capacity budget and its workers' reported consumption (work
	// --max-wcu/--max-rcu, resume --max-wcu/--max-rcu); null when the group has none.
	Budget *budgetDoc `json:"budget"`
	// GeneratedAt is when the group was read (the page's last sample).
	GeneratedAt time.Time `json:"generated_at"`
	Slots       []slotDoc `json:"slots"`
	// Items are the ledger's exact counts by state, and DeadLetters its dead letters, as of the
	// ledger's last read (see Ledger for when); null before one.
	Items       *itemCounts  `json:"items"`
	Throughput  throughput   `json:"throughput"`
	DeadLetters *deadLetters `json:"dead_letters"`
	Worker      *workerDoc   `json:"worker"` // the serving worker's own stats (work --metrics-addr); else null
	// Progress sums the slots' counts (from their checkpoints); null when no slot has any.
	Progress *groupProgress `json:"progress"`
	// Ledger says when the ledger was last read, what the read cost and when the next one is;
	// null when the ledger is not read (status --json without --table, --ledger-interval 0, or a
	// group that has not recorded its table yet).
	Ledger *ledgerState `json:"ledger"`
	// Reads are what the page's server has read since it started: its cost (null for --json).
	Reads *pageReads `json:"reads"`
	// Stream is the table's stream as the group's readers follow it (work --follow): its shards'
	// owners, positions and lags; null when the group does not follow a stream. The versions
	// handled, superseded and unchanged are the workers' counters: see Worker and their metrics.
	Stream *streamDoc `json:"stream"`
	// Error is the last sample's error, when it failed ("" otherwise: always in the JSON); the
	// rest is from the sample before.
	Error string `json:"error"`
}

// slotDoc is one slot. Progress is read from the slot's checkpoint; null before its first one.
type slotDoc struct {
	slotJSON // the lease, as `status --json` prints it
	// State is one of working (lease held), finished, released, expired (held once, not renewed)
	// or free (never acquired).
	State string `json:"state"`
	// Following says the slot's share was read and its holders follow the table's stream (work
	// --follow) instead of scanning it again.
	Following bool `json:"following"`
	// Rescanning says the slot's holder scans the whole table again, because the stream may have
	// lost records its readers had not read (work --follow; see README).
	Rescanning bool `json:"rescanning"`
	// Progress counts the slot's items; null when not known.
	Progress *slotProgress `json:"progress"`
	// Fraction is how far the slot's share is, 0..1: its items done or failed / the share
	// estimate (1 once finished); null when not known.
	Fraction *float64 `json:"fraction"`
}

// slotProgress is a slot's counts as saved with its checkpoint. More counters may be added.
type slotProgress struct {
	Done    int64 `json:"done"`    // items the slot moved to done, over all passes
	Failed  int64 `json:"failed"`  // items the slot moved to failed (dead letters), over all passes
	Scanned int64 `json:"scanned"` // items read in the current pass
	Pass    int   `json:"pass"`    // the current pass, from 1
	// ElapsedSeconds is the current pass's working time (pauses excluded); Rate is Scanned per
	// second of it (0 once finished, and while no live worker holds the slot).
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Rate           float64 `json:"rate"`
	// ShareEstimate is the items the slot reads per pass: the table's ItemCount / N, an estimate;
	// null when unknown. ETASeconds is the rest of the share at Rate (0 when finished), null when
	// it cannot be told (no live worker holds the slot, or no rate yet).
	ShareEstimate *int64   `json:"share_estimate"`
	ETASeconds    *float64 `json:"eta_seconds"`
}

// itemCounts are the ledger's counts of the source table's items by state.
type itemCounts = worker.Summary

// throughput is the group's rate of items done over time, how far it is, and the ETA it gives.
// The counts are the slots' (from their checkpoints, every sample) on top of the ledger's exact
// ones (every --ledger-interval): done = the ledger's done + what the slots counted since its read.
type throughput struct {
	// Done is the items done now; null when no count is known. Failed likewise.
	Done   *int64 `json:"done"`
	Failed *int64 `json:"failed"`
	// Total is the items to process: the ledger's count when read, else the table's ItemCount
	// (DescribeTable, an estimate); TotalSource says which ("ledger", "table_estimate"); null /
	// "" when neither is known. Left is Total - Done - Failed (at least 0).
	Total       *int64 `json:"total"`
	TotalSource string `json:"total_source"`
	Left        *int64 `json:"left"`
	// Fraction and FailedFraction are Done / Total and Failed / Total (0..1): the overall bar.
	Fraction       *float64 `json:"fraction"`
	FailedFraction *float64 `json:"failed_fraction"`
	// Rate is items done or failed per second over the last RateWindow seconds of samples, or,
	// before two samples, the slots' read rate (RateSource "samples" or "checkpoints").
	Rate       float64 `json:"rate"`
	RateWindow float64 `json:"rate_window_seconds"`
	RateSource string  `json:"rate_source"`
	// ETASeconds is Left at Rate, the shares of free slots counted at the group's rate: 0 when
	// nothing is left; null when it cannot be told (no counts, no progress, the group paused, or
	// no live worker holding a slot that is left to read).
	ETASeconds *float64 `json:"eta_seconds"`
	// Samples are the slots' counts at each sample, oldest first, with the rate of items done
	// over the samples of the 10 s before (0 for the first); one per IntervalSeconds,
	// WindowSeconds kept.
	Samples         []sample `json:"samples"`
	IntervalSeconds float64  `json:"interval_seconds"`
	WindowSeconds   float64  `json:"window_seconds"`
}

type sample struct {
	T      int64   `json:"t"` // unix ms
	Done   int64   `json:"done"`
	Failed int64   `json:"failed"`
	Rate   float64 `json:"rate"`
}

// deadLetters are the first dead letters of the ledger and how many there are.
type deadLetters struct {
	Total int64            `json:"total"`
	Items []deadLetterItem `json:"items"`
}

type deadLetterItem struct {
	Key      json.RawMessage `json:"key"`
	Attempts int             `json:"attempts"`
	Error    string          `json:"error"`
	At       time.Time       `json:"at"`
}

type workerDoc struct {
	Owner string `json:"owner"`
	worker.Stats
}

// groupReader reads the group's part of the document (slots, progress: the lease table), as
// the page's sampler does on every tick.
type groupReader interface {
	read(ctx context.Context, now time.Time) (*Document, error)
}

// reader is the groupReader of a lease table: one Query of the group's items per read, and a
// DescribeTable of the source table every statusItemsEvery for the share estimate; for a group
// that follows the table's stream, its shards every streamEvery.
type reader struct {
	locks *lock.Client
	group string
	// stream reads the stream of a group that follows one (nil: not read).
	stream *streamWatch
	// tables describes the source table for the share estimate (nil: no estimate); items is
	// its last item count, read at itemsAt.
	tables  tableDescriber
	items   *int64
	itemsAt time.Time
}

// read reads the group: its slots, their progress and the group's sums, without throughput,
// ledger or worker (see Page for those). Not safe for concurrent use (one sampler calls it).
func (r *reader) read(ctx context.Context, now time.Time) (*Document, error) {
	st, err := r.locks.GroupStatus(ctx, r.group)
	if err != nil {
		return nil, err
	}
	doc := &Document{Group: r.group, Workers: st.N, Epoch: st.Epoch, Meta: st.Meta, Finished: st.Finished(), Exists: groupExists(st), Paused: st.Paused, GeneratedAt: now.UTC(),
		PausedReason: pausedReason(st), Budget: newBudgetDoc(st.Budget), Slots: []slotDoc{}, Throughput: throughput{Samples: []sample{}}}
	plan := planOf(st)
	for _, s := range st.Slots {
		doc.Slots = append(doc.Slots, slotDoc{slotJSON: newSlotJSON(s, plan), State: slotState(s), Following: followsStream(s.Checkpoint),
			Rescanning: rescansTable(s.Checkpoint)})
	}
	r.fillProgress(ctx, doc, st, now)
	doc.Stream = r.stream.doc(ctx, st, now)
	return doc, nil
}

func slotState(s lock.SlotStatus) string {
	switch {
	case s.Finished:
		return "finished"
	case s.Held:
		return "working"
	case s.Released:
		return "released"
	case s.Owner == "":
		return "free"
	default:
		return "expired"
	}
}

// slotCounts are the sums of the slots' done and failed counts (from their checkpoints) and
// whether any slot has counts.
func (d *Document) slotCounts() (done, failed int64, known bool) {
	if d.Progress == nil {
		return 0, 0, false
	}
	return d.Progress.Done, d.Progress.Failed, true
}

func printJSONIndent(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// budgetDoc is a group's budget: the units its workers may consume in all (null: no limit on
// that unit) and what they reported consuming.
type budgetDoc struct {
	MaxWCU  *float64 `json:"max_wcu"`
	MaxRCU  *float64 `json:"max_rcu"`
	UsedWCU float64  `json:"used_wcu"`
	UsedRCU float64  `json:"used_rcu"`
	Reached bool     `json:"reached"`
}

func newBudgetDoc(b lock.Budget) *budgetDoc {
	if !b.Set() {
		return nil
	}
	limit := func(f float64) *float64 {
		if f <= 0 {
			return nil
		}
		return &f
	}
	return &budgetDoc{MaxWCU: limit(b.MaxWCU), MaxRCU: limit(b.MaxRCU), UsedWCU: b.UsedWCU, UsedRCU: b.UsedRCU, Reached: b.Reached()}
}

// pausedReason is the group's pause reason, nil when not paused or not recorded.
func pausedReason(st *lock.GroupStatus) *string {
	if !st.Paused || st.PausedReason == "" {
		return nil
	}
	r := st.PausedReason
	return &r
}
