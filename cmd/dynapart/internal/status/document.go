package status

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// Document is the status page's data: what `status --json` prints and /api/status serves. It
// keeps the fields of the plain `status --json` document (group, workers, meta, finished, slots)
// and adds the state of each slot, progress, item counts, throughput, ETA and dead letters.
// Fields that are not known are null, so clients must allow for them.
type Document struct {
	Group    string            `json:"group"`
	Workers  int               `json:"workers"`
	Epoch    int64             `json:"epoch"` // the plan epoch: +1 per 'dynapart scale'
	Meta     map[string]string `json:"meta,omitempty"`
	Finished bool              `json:"finished"`
	// Paused is the group's pause flag (dynapart pause / resume).
	Paused      bool         `json:"paused"`
	GeneratedAt time.Time    `json:"generated_at"`
	Slots       []slotDoc    `json:"slots"`
	Items       *itemCounts  `json:"items"` // from the ledger; null without --table
	Throughput  throughput   `json:"throughput"`
	DeadLetters *deadLetters `json:"dead_letters"` // from the ledger; null without --table
	Worker      *workerDoc   `json:"worker"`       // the serving worker's own stats (work --metrics-addr); else null
	// Progress sums the slots' counts (from their checkpoints); null when no slot has any.
	Progress *groupProgress `json:"progress"`
}

// slotDoc is one slot. Progress is read from the slot's checkpoint; null before its first one.
type slotDoc struct {
	slotJSON // the lease, as `status --json` prints it
	// State is one of working (lease held), finished, released, expired (held once, not renewed)
	// or free (never acquired).
	State string `json:"state"`
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
	// second of it (0 once finished).
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Rate           float64 `json:"rate"`
	// ShareEstimate is the items the slot reads per pass: the table's ItemCount / N, an estimate;
	// null when unknown. ETASeconds is the rest of the share at Rate (0 when finished), null when
	// it cannot be told.
	ShareEstimate *int64   `json:"share_estimate"`
	ETASeconds    *float64 `json:"eta_seconds"`
}

// itemCounts are the ledger's counts of the source table's items by state.
type itemCounts = worker.Summary

// throughput is the group's rate of items done over time, and the ETA it gives.
type throughput struct {
	// Done is the items done now (ledger count, else the sum of the known slot counts); null
	// when neither is known.
	Done *int64 `json:"done"`
	// Rate is items done per second over the last RateWindow seconds of samples.
	Rate       float64 `json:"rate"`
	RateWindow float64 `json:"rate_window_seconds"`
	// ETASeconds is the time left at Rate for the items neither done nor failed; 0 when none is
	// left, null when it cannot be told (no counts, or no progress yet).
	ETASeconds *float64 `json:"eta_seconds"`
	// Samples are the done counts seen, oldest first, with the rate since the sample before.
	Samples []sample `json:"samples"`
}

type sample struct {
	T    int64   `json:"t"` // unix ms
	Done int64   `json:"done"`
	Rate float64 `json:"rate"`
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

// reader reads a group's status document.
type reader struct {
	locks *lock.Client
	group string
	// ledger gives item counts and dead letters; nil when not known. When openLedger is set, the
	// first read opens it (so a worker makes no DynamoDB call for its page before someone looks).
	ledger     worker.Ledger
	openLedger func(context.Context) (worker.Ledger, error)
	// stats and owner are the serving worker's; stats is nil outside a worker.
	stats func() worker.Stats
	owner string
	// maxDead bounds the dead letters listed (all are counted).
	maxDead int
	// tables describes the source table for the share estimate (nil: no estimate); items is
	// its last item count, read at itemsAt.
	tables  tableDescriber
	items   *int64
	itemsAt time.Time
}

// read builds the document without throughput (see Page for that). Not safe for
// concurrent use (Page serializes reads).
func (r *reader) read(ctx context.Context, now time.Time) (*Document, error) {
	st, err := r.locks.GroupStatus(ctx, r.group)
	if err != nil {
		return nil, err
	}
	doc := &Document{Group: r.group, Workers: st.N, Epoch: st.Epoch, Meta: st.Meta, Finished: groupFinished(st), Paused: st.Paused, GeneratedAt: now.UTC(),
		Slots: []slotDoc{}, Throughput: throughput{Samples: []sample{}}}
	if r.stats != nil {
		doc.Worker = &workerDoc{Owner: r.owner, Stats: r.stats()}
	}
	plan := planOf(st)
	for _, s := range st.Slots {
		doc.Slots = append(doc.Slots, slotDoc{slotJSON: newSlotJSON(s, plan), State: slotState(s)})
	}
	r.fillProgress(ctx, doc, st, now)
	if r.ledger == nil && r.openLedger != nil {
		if r.ledger, err = r.openLedger(ctx); err != nil {
			return nil, err
		}
	}
	if r.ledger != nil {
		if err := r.readLedger(ctx, doc); err != nil {
			return nil, err
		}
	}
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

// readLedger adds the item counts and the dead letters (a scan of the table, or of the ledger
// table's job, each).
func (r *reader) readLedger(ctx context.Context, doc *Document) error {
	sum, err := r.ledger.Summarize(ctx)
	if err != nil {
		return err
	}
	doc.Items = &sum
	dl := &deadLetters{Items: []deadLetterItem{}}
	err = r.ledger.DeadLetters(ctx, func(d worker.DeadLetter) error {
		dl.Total++
		if len(dl.Items) >= r.maxDead {
			return nil
		}
		key, err := cli.PlainJSON(d.Key)
		if err != nil {
			return err
		}
		dl.Items = append(dl.Items, deadLetterItem{Key: key, Attempts: d.Attempts, Error: d.Error, At: d.At.UTC()})
		return nil
	})
	if err != nil {
		return err
	}
	doc.DeadLetters = dl
	return nil
}

// doneCount is the group's items done: the ledger's count, else the sum of the known slot counts.
func (d *Document) doneCount() (int64, bool) {
	if d.Items != nil {
		return d.Items.Done, true
	}
	var n int64
	known := false
	for _, s := range d.Slots {
		if s.Progress != nil {
			n += s.Progress.Done
			known = true
		}
	}
	return n, known
}

// remaining is the items neither done nor failed, when the ledger was read.
func (d *Document) remaining() (int64, bool) {
	if d.Items == nil {
		return 0, false
	}
	return d.Items.Total - d.Items.Done - d.Items.Failed, true
}

func printJSONIndent(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
