package status

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// The ledger's exact counts and its dead letters need scans (of the source table for the inline
// ledger; of the job's rows and the source table's keys for the table ledger). The page reads them
// at an interval of their own (--ledger-interval, default 5 minutes), one read at a time, in the
// background, and serves the last read, with its age and its cost, to every viewer: however many
// people watch, the ledger is read at most once per interval.

// defaultLedgerEvery is --ledger-interval's default, and the interval of a worker's page.
const defaultLedgerEvery = 5 * time.Minute

// ledgerState is the document's `ledger`: where the ledger is, when it was last read, what that
// read cost and when the next one is due.
type ledgerState struct {
	Table string `json:"table"`
	Kind  string `json:"kind"` // inline or table
	Job   string `json:"job"`
	// ReadAt is when the last read started and AgeSeconds how long ago that is; null before the
	// first read has ended. DurationSeconds is how long it took.
	ReadAt          *time.Time `json:"read_at"`
	AgeSeconds      *float64   `json:"age_seconds"`
	DurationSeconds float64    `json:"duration_seconds"`
	// ReadUnits are the read capacity units of the last read, as DynamoDB reported them
	// (ConsumedCapacity), over Requests Scan requests.
	ReadUnits float64 `json:"read_units"`
	Requests  int64   `json:"requests"`
	// IntervalSeconds is --ledger-interval. NextAt is when the next read is due: on a worker's
	// page only if someone looks by then.
	IntervalSeconds float64    `json:"interval_seconds"`
	NextAt          *time.Time `json:"next_at"`
	// Reading says a read is under way; Error is the last read's error (the counts shown are
	// from the read before).
	Reading bool   `json:"reading"`
	Error   string `json:"error"`
}

// ledgerRead is one read of the ledger.
type ledgerRead struct {
	items    worker.Summary
	dead     *deadLetters
	at       time.Time
	took     time.Duration
	units    float64
	requests int64
	// slotDone and slotFailed are the slots' counts (from their checkpoints) at the sample the
	// read started from: what the slots count after it is added to the ledger's counts.
	slotDone, slotFailed int64
}

// ledgerOpener opens a group's ledger as its meta item records it; a nil ledger and no error
// when the group has not recorded its table yet (it has never run).
type ledgerOpener func(ctx context.Context, meta map[string]string) (worker.Ledger, cli.LedgerFlags, error)

// ledgerCache reads the ledger at most once per every and keeps the last read.
type ledgerCache struct {
	every time.Duration
	// onView makes a read due only when someone has looked since the last one (a worker's page:
	// a fleet of workers would otherwise scan the table once per interval each).
	onView  bool
	open    ledgerOpener
	maxDead int
	meter   *readMeter // counts the ledger's Scan requests and their read units
	now     func() time.Time

	mu      sync.Mutex
	led     worker.Ledger
	where   cli.LedgerFlags
	last    *ledgerRead
	err     error
	started time.Time // the last read's start; zero: none yet
	running bool
	reads   int64
}

// maybeStart starts a read in the background when one is due at now (doc is the sample it
// starts from; viewedAt the last view); reads counts it, so that Run can wait for it.
func (c *ledgerCache) maybeStart(ctx context.Context, reads *sync.WaitGroup, now time.Time, doc *Document, viewedAt time.Time) {
	c.mu.Lock()
	due := !c.running && (c.started.IsZero() || now.Sub(c.started) >= c.every) && (!c.onView || viewedAt.After(c.started))
	if due {
		c.running, c.started = true, now
	}
	c.mu.Unlock()
	if !due {
		return
	}
	reads.Add(1)
	go func() {
		defer reads.Done()
		c.refresh(ctx, now, doc)
	}()
}

// refresh reads the ledger (opening it first) and keeps the result, or the error.
func (c *ledgerCache) refresh(ctx context.Context, start time.Time, doc *Document) {
	led, err := c.ledger(ctx, doc.Meta)
	var r *ledgerRead
	if led != nil && err == nil {
		r, err = c.read(ctx, led, start, doc)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	switch {
	case led == nil && err == nil: // no table recorded yet: try again at the next sample
		c.started = time.Time{}
	case errors.Is(err, context.Canceled) && ctx.Err() != nil: // stopping
	case err != nil:
		c.err = err
	default:
		c.last, c.err = r, nil
		c.reads++
	}
}

// ledger is the open ledger, opened from the group's meta on first use.
func (c *ledgerCache) ledger(ctx context.Context, meta map[string]string) (worker.Ledger, error) {
	c.mu.Lock()
	led := c.led
	c.mu.Unlock()
	if led != nil {
		return led, nil
	}
	led, where, err := c.open(ctx, meta)
	if led == nil || err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.led, c.where = led, where
	c.mu.Unlock()
	return led, nil
}

// read reads the counts and the dead letters, and what that cost.
func (c *ledgerCache) read(ctx context.Context, led worker.Ledger, start time.Time, doc *Document) (*ledgerRead, error) {
	reqs0, units0 := c.meter.total()
	sum, err := led.Summarize(ctx)
	if err != nil {
		return nil, err
	}
	dead, err := readDeadLetters(ctx, led, c.maxDead)
	if err != nil {
		return nil, err
	}
	reqs, units := c.meter.total()
	r := &ledgerRead{items: sum, dead: dead, at: start, took: c.now().Sub(start), units: units - units0, requests: reqs - reqs0}
	r.slotDone, r.slotFailed, _ = doc.slotCounts()
	return r, nil
}

// readDeadLetters counts the ledger's dead letters and keeps the first limit.
func readDeadLetters(ctx context.Context, led worker.Ledger, limit int) (*deadLetters, error) {
	dl := &deadLetters{Items: []deadLetterItem{}}
	err := led.DeadLetters(ctx, func(d worker.DeadLetter) error {
		dl.Total++
		if len(dl.Items) >= limit {
			return nil
		}
		key, err := cli.PlainJSON(d.Key)
		if err != nil {
			return err
		}
		dl.Items = append(dl.Items, deadLetterItem{Key: key, Attempts: d.Attempts, Error: d.Error, At: d.At.UTC()})
		return nil
	})
	return dl, err
}

// snapshot is the last read as the document shows it at now: the counts, the dead letters, the
// ledger's state, and the read itself (nil before the first).
func (c *ledgerCache) snapshot(now time.Time) (*itemCounts, *deadLetters, *ledgerState, *ledgerRead) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.led == nil && c.err == nil {
		return nil, nil, nil, nil // no table recorded yet
	}
	st := &ledgerState{Table: c.where.Table, Kind: c.where.Kind, Job: c.where.Job, IntervalSeconds: c.every.Seconds(), Reading: c.running}
	if c.err != nil {
		st.Error = c.err.Error()
	}
	if !c.started.IsZero() {
		next := c.started.Add(c.every).UTC()
		st.NextAt = &next
	}
	r := c.last
	if r == nil {
		return nil, nil, st, nil
	}
	at, age := r.at.UTC(), now.Sub(r.at).Seconds()
	st.ReadAt, st.AgeSeconds, st.DurationSeconds = &at, &age, r.took.Seconds()
	st.ReadUnits, st.Requests = r.units, r.requests
	items := r.items
	return &items, r.dead, st, r
}

// failed is the error of the last read (or of opening the ledger), nil when it succeeded.
func (c *ledgerCache) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// counts are the reads made so far and what they cost.
func (c *ledgerCache) counts() (reads, requests int64, units float64) {
	c.mu.Lock()
	reads = c.reads
	c.mu.Unlock()
	requests, units = c.meter.total()
	return reads, requests, units
}
