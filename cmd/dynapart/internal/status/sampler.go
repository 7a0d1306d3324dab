package status

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/dynapart/dynapart/worker"
)

// The page's server samples the group on its own clock: every interval it reads the group's
// items in the lease table (one Query) and keeps the slots' counts as a sample, whether or not
// anyone watches, so the chart has the job's history from before the first view; it starts the
// ledger's reads when they are due (ledgerCache). A view reads nothing: it is served from the
// last sample, the samples kept and the ledger's last read.

const (
	// pageSamples is how many samples the page keeps (at the default interval, 30 minutes).
	pageSamples = 900
	// rateWindow is the span the rate and ETA are measured over.
	rateWindow = 30 * time.Second
	// chartWindow is the span each charted rate is measured over (at least the interval).
	chartWindow = 10 * time.Second
	// maxDeadLetters bounds the dead letters listed on the page (all are counted).
	maxDeadLetters = 50
	// workerPageIdle is how long a worker's page goes on sampling after its last view.
	workerPageIdle = 10 * time.Minute
)

// pageClock is the page's time: now, and a ticker (tests drive both).
type pageClock struct {
	now    func() time.Time
	ticker func(d time.Duration) (ticks <-chan time.Time, stop func())
}

func realClock() pageClock {
	return pageClock{now: time.Now, ticker: func(d time.Duration) (<-chan time.Time, func()) {
		t := time.NewTicker(d)
		return t.C, t.Stop
	}}
}

// Page is the live status page of a group: Run samples it, Mount serves it.
type Page struct {
	reader groupReader
	every  time.Duration
	clock  pageClock
	ledger *ledgerCache // nil: the ledger is not read
	// always samples whether or not anyone watches (status --serve); otherwise only within
	// workerPageIdle of a view (a worker's page: a fleet would multiply the reads).
	always bool
	lease  *readMeter // the group reads' cost
	// streams counts the requests of the stream's reads (a group that follows one); nil: none.
	streams *readMeter
	// stats and owner are the serving worker's; stats is nil outside a worker.
	stats   func() worker.Stats
	owner   string
	sampled func() // called after each sample (tests)

	mu        sync.Mutex
	since     time.Time
	last      *Document
	lastErr   error
	samples   []sample
	reads     int64
	views     int64
	viewedAt  time.Time
	ready     chan struct{} // closed once the first sample was tried
	readyOnce sync.Once
	wake      chan struct{} // a view's request for a sample (a worker's page)
}

func newPage(r groupReader, every time.Duration, clock pageClock) *Page {
	return &Page{reader: r, every: every, clock: clock, always: true, lease: &readMeter{}, since: clock.now(),
		ready: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// Run samples the group until ctx ends: at once and every p.every (while watched, for a worker's
// page), starting the ledger's reads when due. It returns after every read it started.
func (p *Page) Run(ctx context.Context) {
	ticks, stop := p.clock.ticker(p.every)
	defer stop()
	var reads sync.WaitGroup
	defer reads.Wait()
	if p.always {
		p.sample(ctx, &reads)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			if !p.always && !p.watched() {
				continue
			}
		case <-p.wake:
		}
		p.sample(ctx, &reads)
	}
}

// once reads the group and, when the page has a ledger, the ledger, and returns the document:
// `status --json`. An error of either read is returned (a table that does not exist: exit 2).
func (p *Page) once(ctx context.Context) (*Document, error) {
	var reads sync.WaitGroup
	p.sample(ctx, &reads)
	reads.Wait()
	if p.ledger != nil {
		if err := p.ledger.failed(); err != nil {
			return nil, err
		}
	}
	return p.compose(p.clock.now())
}

func (p *Page) watched() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.viewedAt.IsZero() && p.clock.now().Sub(p.viewedAt) < workerPageIdle
}

// sample reads the group once, keeps its counts, and starts a ledger read when one is due.
func (p *Page) sample(ctx context.Context, reads *sync.WaitGroup) {
	now := p.clock.now()
	doc, err := p.reader.read(ctx, now)
	if err != nil && ctx.Err() != nil {
		return // stopping
	}
	p.mu.Lock()
	p.reads++
	if err != nil {
		p.lastErr = err
	} else {
		p.last, p.lastErr = doc, nil
		p.addSample(doc, now)
	}
	viewedAt := p.viewedAt
	p.mu.Unlock()
	p.readyOnce.Do(func() { close(p.ready) })
	if err == nil && p.ledger != nil {
		p.ledger.maybeStart(ctx, reads, now, doc, viewedAt)
	}
	if p.sampled != nil {
		p.sampled()
	}
}

// addSample keeps the slots' counts of doc, with the rate of items done over the samples of the
// last chartWindow (the slots save their counts about once a second: a shorter span would chart
// their steps, not the rate).
func (p *Page) addSample(doc *Document, now time.Time) {
	done, failed, _ := doc.slotCounts()
	s := sample{T: now.UnixMilli(), Done: done, Failed: failed}
	from := s
	for i := len(p.samples) - 1; i >= 0 && s.T-p.samples[i].T <= max(chartWindow, p.every).Milliseconds(); i-- {
		from = p.samples[i]
	}
	if dt := float64(s.T-from.T) / 1000; dt > 0 {
		s.Rate = max(0, float64(s.Done-from.Done)/dt)
	}
	p.samples = append(p.samples, s)
	if len(p.samples) > pageSamples {
		p.samples = slices.Delete(p.samples, 0, len(p.samples)-pageSamples)
	}
}

// view is the document for a viewer: the last sample with the throughput, the ledger's last read
// and the worker's stats. It reads nothing; before the first sample it waits for it.
func (p *Page) view(ctx context.Context) (*Document, error) {
	now := p.clock.now()
	p.mu.Lock()
	p.views++
	p.viewedAt = now
	stale := p.last == nil || now.Sub(p.last.GeneratedAt) >= p.every
	p.mu.Unlock()
	if !p.always && stale {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.compose(now)
}

// compose builds the document from the last sample; the error of the first sample when none
// succeeded yet.
func (p *Page) compose(now time.Time) (*Document, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return nil, p.lastErr
	}
	doc := *p.last
	if p.lastErr != nil {
		doc.Error = p.lastErr.Error()
	}
	var read *ledgerRead
	reads := &pageReads{Since: p.since.UTC(), GroupReads: p.reads, Views: p.views}
	reads.LeaseRequests, reads.LeaseReadUnits = p.lease.total()
	if p.streams != nil {
		reads.StreamRequests, _ = p.streams.total()
	}
	if p.ledger != nil {
		doc.Items, doc.DeadLetters, doc.Ledger, read = p.ledger.snapshot(now)
		reads.LedgerReads, reads.LedgerRequests, reads.LedgerReadUnits = p.ledger.counts()
	}
	doc.Reads = reads
	doc.Throughput = throughputOf(p.samples, read, &doc, p.every)
	if p.stats != nil {
		doc.Worker = &workerDoc{Owner: p.owner, Stats: p.stats()}
	}
	return &doc, nil
}
