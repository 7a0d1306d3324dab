package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// The follow scenario (issue 35): what a change costs a continuous worker that follows the
// table's stream (Config.Follow) against one that rescans its share every PollInterval, on the
// same table under the same trickle of changes, and how long a change takes to reach the handler.
//
// One table, seeded and with its stream on before any worker starts. The runs go one after the
// other on it, each a worker of a group of its own: follow first (its first pass is the back-fill
// that marks every item done), then the rescans at each poll (their first pass finds every item
// done). Each run is measured from the end of its first pass (for follow, from once its reader
// has also read the records of the pass's own writes), over a window in which a writer changes
// one random item every WriteEvery.
//
// It needs a DynamoDB Local that has not served a large stream before: one that has (a run of
// this scenario) was seen to write to a new stream's table tens of times slower (10 items a second
// in the back-fill instead of 400), whether or not the old table's stream was turned off before it
// was dropped. make bench starts a fresh one, and this is the suite's only scenario with a stream.

// Defaults of the follow scenario.
const (
	FollowItems      = 20000
	FollowWindow     = 150 * time.Second
	FollowWriteEvery = 600 * time.Millisecond // 100 changes a minute
)

// FollowConfig sizes the follow scenario.
type FollowConfig struct {
	// Items is the table's size. Defaults to FollowItems.
	Items int
	// Window is how long the writer changes items in each run. Defaults to FollowWindow.
	Window time.Duration
	// WriteEvery is the time between two changes. Defaults to FollowWriteEvery.
	WriteEvery time.Duration
	// Polls are the rescans' PollIntervals, one run each. Defaults to 30s (the worker's default
	// for a continuous worker) and 1s (a poll whose latency matches follow's).
	Polls []time.Duration
}

func (c FollowConfig) withDefaults() FollowConfig {
	if c.Items < 1 {
		c.Items = FollowItems
	}
	if c.Window <= 0 {
		c.Window = FollowWindow
	}
	if c.WriteEvery <= 0 {
		c.WriteEvery = FollowWriteEvery
	}
	if len(c.Polls) == 0 {
		c.Polls = []time.Duration{30 * time.Second, time.Second}
	}
	return c
}

// Follow is what the follow scenario measured: one run that follows the stream, then one run of
// rescans per poll.
type Follow struct {
	Config   FollowConfig
	Table    string        // the source table (its bill is told from the lease table's by name)
	Backfill time.Duration // the follow worker's first pass (not measured further)
	Runs     []*FollowRun
}

// FollowRun is one worker under the writer's changes.
type FollowRun struct {
	Follow bool          // follows the stream; else rescans its share
	Poll   time.Duration // StreamPoll when it follows, PollInterval when it rescans
	// Changes counts the changes the writer made in the window.
	Changes int
	// Superseded counts changes the handler never saw because a later change of the same item
	// reached it first; Unseen, changes neither seen nor superseded when the run ended.
	Superseded, Unseen int
	// Latencies are the times from each seen change's write (the UpdateItem call) to its handler,
	// sorted.
	Latencies []time.Duration
	// Window is counted from the end of the first pass to the end of the writer's window; Drained,
	// from the same start until every change of the window was seen or superseded (or the drain
	// timed out).
	Window, Drained FollowCounts
}

// FollowCounts are a worker's figures over one span of a run: deltas of its Stats, of the bill of
// every DynamoDB request it sent, and of its stream requests.
type FollowCounts struct {
	Span      time.Duration
	ScanRCU   float64 // Stats.RCU less Stats.Follow.RCU: its scans
	FollowRCU float64 // Stats.Follow.RCU: its reads of changed items
	WCU       float64 // Stats.WCU: the ledger's writes
	Passes    int64
	Completed int64
	Records   int64 // stream records read
	Bill      Bill  // every DynamoDB request, by DynamoDB's billing rules (billingDB)
	Stream    StreamCalls
}

// StreamCalls counts requests to DynamoDB Streams.
type StreamCalls struct {
	GetRecords, GetShardIterator, DescribeStream int64
}

// Total is every stream request.
func (s StreamCalls) Total() int64 { return s.GetRecords + s.GetShardIterator + s.DescribeStream }

// MeasureFollow runs the follow scenario once (its runs are minutes long: one repetition).
func (e *Env) MeasureFollow(ctx context.Context, cfg FollowConfig) (*Follow, error) {
	f := &Follow{Config: cfg.withDefaults()}
	c := f.Config
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	table, err := e.freshTable(ctx, "follow", c.Items)
	if err != nil {
		return nil, err
	}
	defer e.dropTable(table)
	f.Table = table
	if _, _, err := follow.EnableStream(ctx, e.DB, table); err != nil {
		return nil, err
	}
	if err := dynamodb.NewTableExistsWaiter(e.DB).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return nil, fmt.Errorf("wait for the stream of %s: %w", table, err)
	}
	streams := e.Streams
	if streams == nil {
		streams = newStreamsClient(e.Endpoint)
	}
	f.Runs = append(f.Runs, &FollowRun{Follow: true})
	for _, p := range c.Polls {
		f.Runs = append(f.Runs, &FollowRun{Poll: p})
	}
	for _, run := range f.Runs {
		if err := e.followRun(ctx, f, table, leases, run, streams); err != nil {
			return nil, fmt.Errorf("%s: %w", run.Name(), err)
		}
		lat := func(p float64) string { return fmtSeconds(run.Percentile(p)) }
		e.logf("follow: %-19s %d changes, %.2f RCU and %.2f WCU per change, %d passes in the window; write to handler p50 %s p95 %s max %s; %d superseded, %d unseen",
			run.Name(), run.Changes, run.RCUPerChange(), run.WCUPerChange(), run.Window.Passes, lat(0.5), lat(0.95), lat(1), run.Superseded, run.Unseen)
	}
	return f, nil
}

// Name is the run's label: "follow (stream poll 1s)", "rescans every 30s".
func (r *FollowRun) Name() string {
	if r.Follow {
		return fmt.Sprintf("follow (stream poll %s)", r.Poll)
	}
	return fmt.Sprintf("rescans every %s", r.Poll)
}

// followRun runs one worker: its first pass, then the writer's window, then the drain.
func (e *Env) followRun(ctx context.Context, f *Follow, table, leases string, run *FollowRun, streams follow.StreamsClient) error {
	c := f.Config
	name := "follow"
	if !run.Follow {
		name = "rescans-" + run.Poll.String()
	}
	changes := newChangeLog(c.Items, "chg-"+name+"-")
	db := newBillingDB(e.DB, nil)
	sc := &countingStreams{next: streams}
	wc := worker.Config{Client: db, Table: table, LeaseTable: leases, Group: table + "/" + name, Owner: name,
		Workers: 1, Logger: quietLogger}
	if run.Follow {
		wc.Follow, wc.Streams = true, sc
	} else {
		wc.PollInterval = run.Poll
	}
	w, err := worker.New(wc)
	if err != nil {
		return err
	}
	if run.Follow {
		run.Poll = w.Config().StreamPoll
	}
	began := time.Now()
	rw := startWorker(ctx, w, changes.handler)
	defer rw.stop()
	firstPass := func(s worker.Stats) bool { return s.Passes >= 1 }
	if run.Follow {
		firstPass = caughtUp(3 * time.Second)
	}
	rw.progress = func(s worker.Stats) {
		e.logf("follow: %s: waiting for the first pass: %s", run.Name(), statsLine(s))
	}
	err = rw.until(ctx, 15*time.Minute, "the first pass", firstPass)
	rw.progress = nil
	if errors.Is(err, errWaitTimeout) {
		return fmt.Errorf("%w (a DynamoDB Local that has served a large stream before writes to a new stream's table tens of times slower: run on a fresh one, as make bench does)", err)
	}
	if err != nil {
		return err
	}
	s0 := w.Stats()
	if run.Follow {
		f.Backfill = time.Since(began)
		if s0.Completed != int64(c.Items) {
			return fmt.Errorf("the first pass completed %d of %d items", s0.Completed, c.Items)
		}
	}
	e.logf("follow: %s: first pass done and measured from %s after start (%d items completed, %d stream records read)",
		run.Name(), time.Since(began).Round(time.Second), s0.Completed, followRecords(s0))
	start := snapshot{at: time.Now(), stats: s0, bill: db.Bill(), stream: sc.calls()}
	if err := e.writeChanges(ctx, table, changes, c.WriteEvery, c.Window, !run.Follow); err != nil {
		return err
	}
	run.Window = start.counts(snapshot{at: time.Now(), stats: w.Stats(), bill: db.Bill(), stream: sc.calls()})
	// Drained: every change seen or superseded, and as many completions as changes seen (the
	// handler sees a change before its completion is written).
	err = rw.until(ctx, run.Poll+2*time.Minute, "every change handled", func(s worker.Stats) bool {
		return changes.pending() == 0 && s.Completed-s0.Completed >= int64(changes.seenCount())
	})
	if err != nil && !errors.Is(err, errWaitTimeout) {
		return err
	}
	run.Drained = start.counts(snapshot{at: time.Now(), stats: w.Stats(), bill: db.Bill(), stream: sc.calls()})
	run.Changes = changes.written()
	run.Latencies, run.Superseded, run.Unseen = changes.tally()
	return rw.stop()
}

// caughtUp is the condition of a follow worker that has made its first pass and read the stream
// up to now: its reader holds a shard, has nothing unresolved, and has read no record for quiet.
func caughtUp(quiet time.Duration) func(worker.Stats) bool {
	last, since := int64(-1), time.Time{}
	return func(s worker.Stats) bool {
		if s.Passes < 1 || s.Follow == nil || len(s.Follow.Shards) == 0 || s.Follow.Lag > 0 {
			return false
		}
		if s.Follow.Records != last {
			last, since = s.Follow.Records, time.Now()
			return false
		}
		return time.Since(since) >= quiet
	}
}

// followRecords is the stream records a worker read (0 unless it follows the stream).
func followRecords(s worker.Stats) int64 {
	if s.Follow == nil {
		return 0
	}
	return s.Follow.Records
}

// statsLine is a worker's progress in one line.
func statsLine(s worker.Stats) string {
	line := fmt.Sprintf("state %s, slot %d, %d passes, %d scanned, %d completed, %d skipped, %d leases lost", s.State, s.Slot, s.Passes, s.Scanned, s.Completed, s.Skipped, s.LeasesLost)
	if f := s.Follow; f != nil {
		line += fmt.Sprintf("; stream: %d records, %d handled, lag %s, %d shards", f.Records, f.Handled, f.Lag.Round(time.Millisecond), len(f.Shards))
	}
	return line
}

// snapshot is a worker's figures at one moment.
type snapshot struct {
	at     time.Time
	stats  worker.Stats
	bill   Bill
	stream StreamCalls
}

// counts are the figures from s to end.
func (s snapshot) counts(end snapshot) FollowCounts {
	c := FollowCounts{Span: end.at.Sub(s.at), ScanRCU: end.stats.RCU - s.stats.RCU, WCU: end.stats.WCU - s.stats.WCU,
		Passes: end.stats.Passes - s.stats.Passes, Completed: end.stats.Completed - s.stats.Completed,
		Bill: billSince(s.bill, end.bill),
		Stream: StreamCalls{GetRecords: end.stream.GetRecords - s.stream.GetRecords, GetShardIterator: end.stream.GetShardIterator - s.stream.GetShardIterator,
			DescribeStream: end.stream.DescribeStream - s.stream.DescribeStream}}
	if end.stats.Follow != nil && s.stats.Follow != nil {
		c.FollowRCU = end.stats.Follow.RCU - s.stats.Follow.RCU
		c.ScanRCU -= c.FollowRCU // Stats.RCU counts the reads of items too
		c.Records = end.stats.Follow.Records - s.stats.Follow.Records
	}
	return c
}

// billSince is what was billed from before to after (after is a later Bill of the same billingDB).
func billSince(before, after Bill) Bill {
	d := Bill{Requests: after.Requests - before.Requests, ByOp: map[string]int64{}, Tables: map[string]TableBill{}}
	for op, n := range after.ByOp {
		if n -= before.ByOp[op]; n != 0 {
			d.ByOp[op] = n
		}
	}
	for t, tb := range after.Tables {
		b := before.Tables[t]
		d.Tables[t] = TableBill{Units: Units{WCU: tb.WCU - b.WCU, RCU: tb.RCU - b.RCU}, MaxWrite: tb.MaxWrite, MaxRead: tb.MaxRead}
	}
	return d
}

// writeChanges changes one random item every `every` for window (the first at once): SET payload
// to the change's value, recorded in log before the write is sent. reset also removes the item's
// state (README's reprocessing), without which a rescan skips the changed item as done.
func (e *Env) writeChanges(ctx context.Context, table string, log *changeLog, every, window time.Duration, reset bool) error {
	rng := rand.New(rand.NewPCG(35, 35)) // every run changes the same items in the same order
	tick := time.NewTicker(every)
	defer tick.Stop()
	end := time.Now().Add(window)
	for {
		i := rng.IntN(log.items)
		seq := log.wrote(i, time.Now())
		if _, err := e.DB.UpdateItem(ctx, changeWrite(table, i, log.value(seq), reset)); err != nil {
			return fmt.Errorf("change %s: %w", itemKey(i), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case t := <-tick.C:
			if !t.Before(end) {
				return nil
			}
		}
	}
}

// changeWrite is the writer's change of item i: its payload set to value, and with reset its
// inline ledger state removed.
func changeWrite(table string, i int, value string, reset bool) *dynamodb.UpdateItemInput {
	expr := "SET #p = :v"
	names := map[string]string{"#p": "payload"}
	if reset {
		expr += " REMOVE #s, #d"
		names["#s"], names["#d"] = ledger.DefaultAttrPrefix+"status", ledger.DefaultAttrPrefix+"done_at"
	}
	return &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: keyOf(i), UpdateExpression: aws.String(expr),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: value}}}
}

// changeLog is the writer's changes and when the handler saw each: a change is the payload value
// prefix+seq.
type changeLog struct {
	items  int
	prefix string

	mu      sync.Mutex
	changes []change
}

type change struct {
	item        int
	wrote, seen time.Time
}

func newChangeLog(items int, prefix string) *changeLog {
	return &changeLog{items: items, prefix: prefix}
}

func (l *changeLog) value(seq int) string { return l.prefix + strconv.Itoa(seq) }

// wrote records a change of item i about to be written at and returns its sequence number.
func (l *changeLog) wrote(i int, at time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, change{item: i, wrote: at})
	return len(l.changes) - 1
}

func (l *changeLog) written() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.changes)
}

// handler is the workers' handler: it notes when it first sees each change of the log.
func (l *changeLog) handler(_ context.Context, it worker.Item) error {
	v, ok := it.Attrs["payload"].(*types.AttributeValueMemberS)
	if !ok || !strings.HasPrefix(v.Value, l.prefix) {
		return nil // the seeded payload, or another run's change
	}
	seq, err := strconv.Atoi(strings.TrimPrefix(v.Value, l.prefix))
	if err != nil {
		return nil
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq < len(l.changes) && l.changes[seq].seen.IsZero() {
		l.changes[seq].seen = now
	}
	return nil
}

// tally sorts the changes out: the latencies of those seen (sorted), the number superseded (not
// seen, and a later change of the same item seen) and the number unseen (the others).
func (l *changeLog) tally() (latencies []time.Duration, superseded, unseen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lastSeen := map[int]int{} // item -> its latest change seen
	for seq, c := range l.changes {
		if !c.seen.IsZero() {
			lastSeen[c.item] = seq
		}
	}
	for seq, c := range l.changes {
		switch last, ok := lastSeen[c.item]; {
		case !c.seen.IsZero():
			latencies = append(latencies, c.seen.Sub(c.wrote))
		case ok && last > seq:
			superseded++
		default:
			unseen++
		}
	}
	sortDurations(latencies)
	return latencies, superseded, unseen
}

// seenCount is the number of changes the handler saw.
func (l *changeLog) seenCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.changes {
		if !c.seen.IsZero() {
			n++
		}
	}
	return n
}

// pending is the number of changes neither seen nor superseded.
func (l *changeLog) pending() int {
	_, _, unseen := l.tally()
	return unseen
}

// runningWorker is a worker whose Run runs in a goroutine of its own.
type runningWorker struct {
	w        *worker.Worker
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
	progress func(worker.Stats) // called every 30 s while until waits; nil: none
}

func startWorker(ctx context.Context, w *worker.Worker, h worker.Handler) *runningWorker {
	ctx, cancel := context.WithCancel(ctx)
	r := &runningWorker{w: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = w.Run(ctx, h)
	}()
	return r
}

// stop ends Run and waits for it; nil when Run returned for the stop (again: the same answer).
func (r *runningWorker) stop() error {
	r.cancel()
	<-r.done
	if errors.Is(r.err, context.Canceled) {
		return nil
	}
	return r.err
}

// errWaitTimeout is a condition that did not hold in time.
var errWaitTimeout = errors.New("timed out")

// until looks at the worker's Stats every 100 ms until cond holds; an error if Run returned first,
// ctx ended, or timeout passed (errWaitTimeout).
func (r *runningWorker) until(ctx context.Context, timeout time.Duration, what string, cond func(worker.Stats) bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastProgress := time.Now()
	for !cond(r.w.Stats()) {
		if r.progress != nil && time.Since(lastProgress) >= 30*time.Second {
			r.progress(r.w.Stats())
			lastProgress = time.Now()
		}
		select {
		case <-r.done:
			return fmt.Errorf("the worker returned before %s: %v", what, r.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s: %w after %s", what, errWaitTimeout, timeout)
		case <-tick.C:
		}
	}
	return nil
}

// countingStreams counts the requests a reader sends to DynamoDB Streams.
type countingStreams struct {
	next                                         follow.StreamsClient
	getRecords, getShardIterator, describeStream atomic.Int64
}

func (s *countingStreams) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	s.describeStream.Add(1)
	return s.next.DescribeStream(ctx, in, o...)
}

func (s *countingStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	s.getShardIterator.Add(1)
	return s.next.GetShardIterator(ctx, in, o...)
}

func (s *countingStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	s.getRecords.Add(1)
	return s.next.GetRecords(ctx, in, o...)
}

func (s *countingStreams) calls() StreamCalls {
	return StreamCalls{GetRecords: s.getRecords.Load(), GetShardIterator: s.getShardIterator.Load(), DescribeStream: s.describeStream.Load()}
}

// newStreamsClient is a DynamoDB Streams client for endpoint, with NewClient's dummy credentials.
func newStreamsClient(endpoint string) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("dynapart", "dynapart", ""),
		BaseEndpoint: aws.String(endpoint),
		HTTPClient:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}},
	})
}
