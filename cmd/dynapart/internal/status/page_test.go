package status

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// TestThroughputAndETA: the counts are the ledger's plus what the slots counted since its read,
// the rate is measured over the last 30 s of samples, and the ETA is what is left at that rate.
func TestThroughputAndETA(t *testing.T) {
	t0 := time.UnixMilli(1_750_000_000_000)
	items := int64(1000)
	doc := &Document{Progress: &groupProgress{ItemsEstimate: &items, Rate: 50}}
	at := func(s int, done, failed int64) sample {
		return sample{T: t0.Add(time.Duration(s) * time.Second).UnixMilli(), Done: done, Failed: failed}
	}

	// One sample: no rate between samples yet, so the slots' read rate; the total is the estimate.
	tp := throughputOf([]sample{at(0, 100, 0)}, nil, doc, 2*time.Second)
	require.Equal(t, "checkpoints", tp.RateSource)
	require.Equal(t, "table_estimate", tp.TotalSource)
	require.Equal(t, int64(900), *tp.Left)
	require.InDelta(t, 18, *tp.ETASeconds, 1e-9, "900 left at the slots' 50/s")
	require.InDelta(t, 0.1, *tp.Fraction, 1e-9)

	// The rate is measured over the last 30 s only.
	samples := []sample{at(0, 100, 0), at(10, 300, 0), at(40, 500, 0)}
	tp = throughputOf(samples, nil, doc, 2*time.Second)
	require.Equal(t, "samples", tp.RateSource)
	require.InDelta(t, 200.0/30, tp.Rate, 1e-9)
	require.Equal(t, 30.0, tp.RateWindow)
	require.InDelta(t, 500/(200.0/30), *tp.ETASeconds, 1e-6)

	// With a ledger read: its counts, plus what the slots counted after it.
	read := &ledgerRead{items: worker.Summary{Total: 1200, Done: 450, Failed: 10}, slotDone: 300}
	tp = throughputOf(samples, read, doc, 2*time.Second)
	require.Equal(t, "ledger", tp.TotalSource)
	require.Equal(t, int64(650), *tp.Done, "450 at the read + 200 since")
	require.Equal(t, int64(10), *tp.Failed)
	require.Equal(t, int64(540), *tp.Left)
	require.InDelta(t, 650.0/1200, *tp.Fraction, 1e-9)
	require.InDelta(t, 10.0/1200, *tp.FailedFraction, 1e-9)

	// Paused: no ETA while items are left; nothing left: 0.
	paused := *doc
	paused.Paused = true
	require.Nil(t, throughputOf(samples, read, &paused, time.Second).ETASeconds)
	done := &ledgerRead{items: worker.Summary{Total: 500, Done: 490, Failed: 10}, slotDone: 500}
	tp = throughputOf(samples, done, doc, time.Second)
	require.Equal(t, 0.0, *tp.ETASeconds)
	require.Equal(t, 1.0, *tp.Fraction+*tp.FailedFraction)

	// Nothing known: no counts, no ETA.
	tp = throughputOf(nil, nil, &Document{}, time.Second)
	require.Nil(t, tp.Done)
	require.Nil(t, tp.ETASeconds)
	require.NotNil(t, tp.Samples)
}

// TestGroupETACountsFreeSlots: a free slot's share counts at the group's rate, instead of making
// the group's ETA unknown; the bar's fraction is done / the estimate.
func TestGroupETACountsFreeSlots(t *testing.T) {
	items := int64(20_000)
	share := int64(6_666)
	eta := 40.0
	slots := []slotDoc{
		{slotJSON: slotJSON{Slot: 0, Held: true}, Progress: &slotProgress{Done: 2_000, Scanned: 2_100, Rate: 50, ShareEstimate: &share, ETASeconds: &eta}},
		{slotJSON: slotJSON{Slot: 1, Held: true}, Progress: &slotProgress{Done: 2_223, Scanned: 2_300, Rate: 50, ShareEstimate: &share, ETASeconds: &eta}},
		{slotJSON: slotJSON{Slot: 2}}, // free: no worker
	}
	g := groupProgressOf(slots, 3, &items)
	require.Equal(t, 1, g.FreeSlots)
	require.Equal(t, int64(15_777), *g.Left)
	require.InDelta(t, 15_777.0/100, *g.ETASeconds, 1e-9, "every item left at the working slots' 100/s")
	require.InDelta(t, 4_223.0/20_000, *g.Fraction, 1e-9)
	require.Equal(t, "group: 4223 of ~20000 done (21.1%), 15777 left, ETA 2m38s; 1 slot free, its share counted at the group's rate",
		groupSummary(g, false))

	for i := range slots {
		slots[i].Finished, slots[i].Progress = true, &slotProgress{Done: 6_666}
	}
	g = groupProgressOf(slots, 3, &items)
	require.Equal(t, 0.0, *g.ETASeconds, "every slot finished")
	require.InDelta(t, 1.0, *g.Fraction, 1e-3, "19,998 of ~20,000")
}

// fakeGroup is a groupReader whose slots' done count grows by 10 per read.
type fakeGroup struct {
	mu    sync.Mutex
	reads int
	meta  map[string]string
}

func (f *fakeGroup) read(_ context.Context, now time.Time) (*Document, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	items := int64(1000)
	d := &Document{Group: "g", Workers: 1, Meta: f.meta, GeneratedAt: now.UTC(), Slots: []slotDoc{}}
	d.Progress = &groupProgress{Done: int64(10 * f.reads), ItemsEstimate: &items}
	return d, nil
}

func (f *fakeGroup) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// fakeLedger counts its reads (Summarize and DeadLetters only: a unit test of the page's pacing).
type fakeLedger struct {
	worker.Ledger
	mu    sync.Mutex
	reads int
}

func (l *fakeLedger) Summarize(context.Context) (worker.Summary, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	return worker.Summary{Total: 1000, Done: 5, Pending: 995}, nil
}

func (l *fakeLedger) DeadLetters(context.Context, func(worker.DeadLetter) error) error { return nil }

// testClock is a pageClock whose ticks the test sends, and whose time it sets.
type testClock struct {
	mu    sync.Mutex
	t     time.Time
	ticks chan time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.UnixMilli(1_750_000_000_000), ticks: make(chan time.Time)}
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// tick moves the time on by d and delivers a tick (the page's loop receives it).
func (c *testClock) tick(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	t := c.t
	c.mu.Unlock()
	c.ticks <- t
}

func (c *testClock) pageClock() pageClock {
	return pageClock{now: c.now, ticker: func(time.Duration) (<-chan time.Time, func()) { return c.ticks, func() {} }}
}

// runPage runs p until the test ends; sampled receives once per sample.
func runPage(t *testing.T, p *Page) (sampled chan struct{}) {
	sampled = make(chan struct{}, 100)
	p.sampled = func() { sampled <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return sampled
}

// TestPageSamplesWithoutViewers: the page samples on its clock before anyone looks, views read
// nothing, and the ledger is read at most once per its interval however many views there are.
func TestPageSamplesWithoutViewers(t *testing.T) {
	clock := newTestClock()
	group := &fakeGroup{meta: map[string]string{"table": "users"}}
	led := &fakeLedger{}
	p := newPage(group, 2*time.Second, clock.pageClock())
	p.ledger = newLedgerCache(time.Minute, p.clock, func(context.Context, map[string]string, *readMeter) (worker.Ledger, cli.LedgerFlags, error) {
		return led, cli.LedgerFlags{Table: "users", Kind: "inline"}, nil
	})
	sampled := runPage(t, p)
	<-sampled // the first sample, at start
	for range 4 {
		clock.tick(2 * time.Second)
		<-sampled
	}
	require.Equal(t, 5, group.count(), "sampled with nobody watching")
	require.Eventually(t, func() bool { reads, _, _ := p.ledger.counts(); return reads == 1 }, 10*time.Second, time.Millisecond,
		"the ledger read started by the first sample")

	var doc *Document
	for range 20 {
		var err error
		doc, err = p.view(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, 5, group.count(), "views read nothing")
	require.Len(t, doc.Throughput.Samples, 5, "the history from before the first view")
	require.Equal(t, 0.0, doc.Throughput.Samples[0].Rate, "the first sample has no rate: nothing drawn to 0")
	require.InDelta(t, 5, doc.Throughput.Samples[1].Rate, 1e-9, "10 items in 2 s")
	require.Equal(t, int64(20), doc.Reads.Views)
	require.Equal(t, int64(5), doc.Reads.GroupReads)

	// The ledger: one read at the first sample, none again until its interval has passed.
	require.Equal(t, 1, led.reads)
	require.Equal(t, int64(1), doc.Reads.LedgerReads)
	require.Equal(t, "users", doc.Ledger.Table)
	require.InDelta(t, 8, *doc.Ledger.AgeSeconds, 1e-9, "read at the first sample, 8 s ago")
	require.Equal(t, int64(1000), doc.Items.Total)
	require.Equal(t, int64(5+40), *doc.Throughput.Done, "5 at the read, 40 counted by the slots since")
	for range 25 { // 50 s more: still within the minute
		clock.tick(2 * time.Second)
		<-sampled
	}
	require.Equal(t, 1, led.reads)
	clock.tick(2 * time.Second) // 60 s after the first read
	<-sampled
	doc, err := p.view(context.Background())
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the read runs beside the sampler
		doc, err = p.view(context.Background())
		return err == nil && doc.Reads.LedgerReads == 2
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, 2, led.reads)
}

// TestWorkerPageSamplesOnlyWhenWatched: a worker's page reads nothing until someone looks,
// samples at once for the first view, and reads the ledger only when looked at since its last
// read.
func TestWorkerPageSamplesOnlyWhenWatched(t *testing.T) {
	clock := newTestClock()
	group := &fakeGroup{meta: map[string]string{"table": "users"}}
	led := &fakeLedger{}
	p := newPage(group, 5*time.Second, clock.pageClock())
	p.always = false
	p.ledger = newLedgerCache(time.Minute, p.clock, func(context.Context, map[string]string, *readMeter) (worker.Ledger, cli.LedgerFlags, error) {
		return led, cli.LedgerFlags{Table: "users"}, nil
	})
	p.ledger.onView = true
	sampled := runPage(t, p)
	for range 3 { // each returns once the loop is done with the tick before
		clock.tick(5 * time.Second)
	}
	require.Equal(t, 0, group.count(), "nobody looked")

	doc, err := p.view(context.Background()) // wakes the sampler and waits for its sample
	require.NoError(t, err)
	<-sampled
	require.Equal(t, 1, group.count())
	require.Len(t, doc.Throughput.Samples, 1)
	clock.tick(5 * time.Second)
	<-sampled
	require.Equal(t, 2, group.count(), "sampling while watched")
	clock.tick(workerPageIdle)
	clock.tick(5 * time.Second)
	clock.tick(5 * time.Second) // returns once the loop is done with the ticks before
	require.Equal(t, 2, group.count(), "idle again after workerPageIdle without a view")
	require.Eventually(t, func() bool { led.mu.Lock(); defer led.mu.Unlock(); return led.reads == 1 }, 10*time.Second, time.Millisecond)
}

// TestStatusPageHandlers serves the page for a group on DynamoDB Local: the routes, the document,
// and that views read nothing from DynamoDB (the page's reads are counted from the answers).
func TestStatusPageHandlers(t *testing.T) {
	ctx := context.Background()
	db, leases, lc := testLeaseTable(t)
	lease, err := lc.AcquireSlot(ctx, "g1", 2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(context.Background()) })

	clock := newTestClock()
	meter := &readMeter{}
	pageLocks, err := lock.New(meteredLeaseDB{db, meter}, leases)
	require.NoError(t, err)
	p := newPage(&reader{locks: pageLocks, group: "g1"}, time.Minute, clock.pageClock())
	p.lease = meter
	sampled := runPage(t, p)
	<-sampled
	mux := http.NewServeMux()
	p.Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (*http.Response, string) { return httpGet(t, srv.URL+path) }
	resp, body := get("/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body, `src="assets/app.js"`)
	require.NotContains(t, body, "http://", "no CDN")
	require.NotContains(t, body, "https://", "no CDN")
	for _, a := range []string{"/assets/app.js", "/assets/chart.js", "/assets/style.css"} {
		resp, body := get(a)
		require.Equal(t, http.StatusOK, resp.StatusCode, a)
		require.NotEmpty(t, body)
	}
	resp, _ = get("/nope")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	resp, body = get("/api/status")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var d Document
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, 2, d.Workers)
	require.Len(t, d.Slots, 2)
	held := d.Slots[lease.Slot()]
	require.Equal(t, "w-test", held.Owner)
	require.Equal(t, "working", held.State)
	require.Equal(t, "free", d.Slots[1-lease.Slot()].State)
	require.False(t, d.Paused)
	require.Nil(t, d.Items, "no ledger: no counts")
	require.Nil(t, d.Ledger)
	require.True(t, strings.Contains(body, `"progress":null`), "per-slot progress is a field, null when unknown")
	require.True(t, strings.Contains(body, `"stream":null`), "a group that does not follow a stream: stream is null")
	require.Equal(t, int64(1), d.Reads.GroupReads)
	require.Positive(t, d.Reads.LeaseReadUnits, "the group read's cost, as DynamoDB Local reported it")
	requests := d.Reads.LeaseRequests

	// Views read nothing: the same sample, the same cost, until the next tick.
	require.NoError(t, lease.Release(ctx))
	for range 5 {
		_, body = get("/api/status")
	}
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, "working", d.Slots[lease.Slot()].State)
	require.Equal(t, requests, d.Reads.LeaseRequests)
	require.Equal(t, int64(6), d.Reads.Views)
	clock.tick(time.Minute)
	<-sampled
	_, body = get("/api/status")
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, "released", d.Slots[lease.Slot()].State)
	require.Len(t, d.Throughput.Samples, 2)
}

func httpGet(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// testLeaseTable is a new lease table on the test DynamoDB (deleted when the test ends), with a
// lock client of owner "w-test".
func testLeaseTable(t *testing.T) (db *dynamodb.Client, leases string, lc *lock.Client) {
	t.Helper()
	db = ddbtest.Client(t)
	leases = ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(context.Background(), db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	lc, err := lock.New(db, leases, lock.WithOwner("w-test"))
	require.NoError(t, err)
	return db, leases, lc
}
