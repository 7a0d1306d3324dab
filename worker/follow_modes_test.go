package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
)

// The follow scenario of TestFollowEveryVersionOnce in the modes and under the faults it does not
// cover: filter mode, batched claims, complete-only with the table ledger, lost and failed ledger
// writes, and a stream that fails its reads. Two workers back-fill a table while its items change
// (their handlers are held until the changes are written, so the changes meet the pass in
// flight), then follow its stream through inserts, quick successive updates, rewrites of the same
// values and deletes. Besides the handler runs, every write that moved an item to done is read
// back from the ledger's own stream (the source table's for the inline ledger, the ledger table's
// for the table ledger): the oracle for "done once per version", whatever the workers were told.

// span is the items lo..lo+n-1 of the scenario.
type span struct{ lo, n int }

func (s span) has(i int) bool { return i >= s.lo && i < s.lo+s.n }

// The items of the scenario: modeSeeded items before the workers start, some of them changed
// while the back-fill is in flight, then changes while following. DynamoDB Local with streams
// takes a few dozen writes a second: the table is small.
const modeSeeded = 32

var (
	modeBackfillSets = span{0, 8}  // changed while the pass is in flight
	modeQuick        = span{8, 6}  // three quick updates each while following
	modeRewrites     = span{14, 5} // rewritten with the same values while following
	modeDeletes      = span{19, 4} // deleted while following
	modeUpdDels      = span{23, 3} // updated, then deleted at once, while following
	modeBackfillDels = span{29, 3} // deleted while the pass is in flight
	modeInserts      = span{32, 6} // inserted while following
	modeSentinels    = span{900_000, 2}
)

// modeScenario is one run of the scenario: the ledger, each worker's settings and clients, and
// what the checks allow.
type modeScenario struct {
	kind LedgerKind
	// config adjusts a worker's settings (the scenario's timings are set before).
	config func(c *Config)
	// client is worker name's DynamoDB client (nil: the fixture's).
	client func(name string, f *fixture) DynamoDBClient
	// streams is worker name's streams client (nil: a plain one).
	streams func(name string) follow.StreamsClient
	// completeOnly: no claim decides which of a pass and a reader runs a version's handler, so a
	// version's handler may run twice (README); never after a newer one, and the ledger still
	// moves each version to done once, in order.
	completeOnly bool
	// repeatable reports items whose value may be handled more than once (a write of theirs
	// failed with an unknown outcome, and the item was claimed and handled again): nil, none.
	repeatable func() map[string]bool
}

// modeRun is the state of a scenario run.
type modeRun struct {
	t       *testing.T
	f       *fixture
	s       modeScenario
	log     *versionLog
	want    map[string]int  // live item -> the value of n last written
	deleted map[string]bool // items the test deleted
	workers map[string]*Worker
	// started is closed when the first handler starts; the handlers wait for gate.
	started     chan struct{}
	startedOnce sync.Once
	gate        chan struct{}
	ledgerARN   string // the stream that shows the ledger's writes
	ledger      Ledger // a versioned ledger of the run's kind, for the checks

	mu   sync.Mutex
	lost map[string]bool // the leases workers lost, as runBy names them: their runs may repeat
}

// runModeScenario runs s and checks its promise: every live item's latest version handled and
// done, never a value handled after a newer one, a value handled once (unless s allows more), a
// version moved to done once, unchanged and deleted items not handled again, deleted items not
// back.
func runModeScenario(t *testing.T, s modeScenario) *modeRun {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFixture(t, modeSeeded)
	r := &modeRun{t: t, f: f, s: s, log: &versionLog{runs: map[string][]handledRun{}}, want: map[string]int{},
		deleted: map[string]bool{}, workers: map[string]*Worker{}, lost: map[string]bool{}, started: make(chan struct{}), gate: make(chan struct{})}
	arn, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	r.ledgerARN = arn
	if s.kind == LedgerTable {
		r.ledgerARN, _, err = follow.EnableStream(ctx, f.db, f.ledgerTable)
		require.NoError(t, err)
		r.ledger, err = ledger.NewTable(f.db, f.ledgerTable, "default", f.table, []string{"id"}, ledger.WithVersions())
	} else {
		r.ledger, err = ledger.NewInline(f.db, f.table, []string{"id"}, ledger.WithVersions())
	}
	require.NoError(t, err)
	for i := range modeSeeded {
		r.want[itemKey(i)] = i
	}
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(r.gate) }) }
	dones := map[string]chan error{}
	t.Cleanup(func() { // also when a check failed: Run returns before the test does
		openGate()
		cancel()
		for name, done := range dones {
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("worker %s: %v", name, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("worker %s did not return", name)
			}
		}
	})
	for _, name := range []string{"A", "B"} {
		cfg := f.config(s.kind)
		cfg.Owner, cfg.Workers, cfg.Follow, cfg.Streams = name, 2, true, streamsClient(t)
		// No test here needs a lease or a claim to expire: they are long enough for a DynamoDB
		// Local that other tests keep busy (a claim is held by the gate while the back-fill's
		// changes are written; a batched completion may wait seconds for PartiQL there).
		cfg.StreamPoll, cfg.LeaseTTL, cfg.Heartbeat, cfg.MaxClockSkew = 50*time.Millisecond, 10*time.Second, 2*time.Second, 100*time.Millisecond
		cfg.ClaimTTL, cfg.MaxAttempts = 10*time.Second, 20
		cfg.RetryBackoff, cfg.MaxRetryBackoff, cfg.StandbyPoll = 20*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		// A pass left dirty (a write of unknown outcome) is made again after PollInterval before
		// the slot follows the stream.
		cfg.PollInterval = 500 * time.Millisecond
		cfg.Hooks.OnLease = r.leaseLost(name)
		if s.client != nil {
			cfg.Client = s.client(name, f)
		}
		if s.streams != nil {
			cfg.Streams = s.streams(name)
		}
		if s.config != nil {
			s.config(&cfg)
		}
		w, err := New(cfg)
		require.NoError(t, err)
		r.workers[name] = w
		done := make(chan error, 1)
		dones[name] = done
		go func() { done <- w.Run(ctx, r.handler(name)) }()
	}

	// The back-fill: its handlers wait while items change and go.
	began := time.Now()
	select {
	case <-r.started:
	case <-time.After(60 * time.Second):
		t.Fatal("no handler started")
	}
	// Written side by side, so that the handlers' claims (ClaimTTL) outlast the writes.
	var writers sync.WaitGroup
	errs := make([]error, 4)
	for w := range errs {
		writers.Go(func() {
			for i := modeBackfillSets.lo + w; modeBackfillSets.has(i) && errs[w] == nil; i += 4 {
				_, errs[w] = f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(f.table), Key: skey(itemKey(i)), UpdateExpression: aws.String("SET n = :n"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: fmt.Sprint(i + 1000)}},
				})
			}
			if i := modeBackfillDels.lo + w; modeBackfillDels.has(i) && errs[w] == nil {
				_, errs[w] = f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: skey(itemKey(i))})
			}
		})
	}
	writers.Wait()
	require.NoError(t, errors.Join(errs...))
	for i := modeBackfillSets.lo; modeBackfillSets.has(i); i++ {
		r.want[itemKey(i)] = i + 1000
	}
	for i := modeBackfillDels.lo; modeBackfillDels.has(i); i++ {
		delete(r.want, itemKey(i))
		r.deleted[itemKey(i)] = true
	}
	openGate()
	waitHandled(t, r.log, r.want)
	r.waitFollowing()
	backfilled := time.Since(began)

	// Following.
	f.seed(t, modeInserts.lo, modeInserts.n, nil)
	for i := modeInserts.lo; modeInserts.has(i); i++ {
		r.want[itemKey(i)] = i
	}
	for i := modeQuick.lo; modeQuick.has(i); i++ {
		for step := 1; step <= 3; step++ {
			r.set(i, i+step*10_000)
		}
	}
	for i := modeRewrites.lo; modeRewrites.has(i); i++ {
		setN(t, f, i, i) // no new content
	}
	for i := modeDeletes.lo; modeDeletes.has(i); i++ {
		r.delete(i)
	}
	for i := modeUpdDels.lo; modeUpdDels.has(i); i++ {
		setN(t, f, i, i+50_000)
		r.delete(i)
	}
	waitHandled(t, r.log, r.want)
	r.settle()
	t.Logf("back-fill %s (from the workers' start), changes written and handled %s", backfilled.Round(time.Millisecond), (time.Since(began) - backfilled).Round(time.Millisecond))
	cancel()
	for name, done := range dones {
		if err := <-done; !errors.Is(err, context.Canceled) {
			require.NoError(t, err, "worker %s", name)
		}
		delete(dones, name)
	}
	r.check()
	return r
}

// handler records a run after the gate opens; a run whose claim ends first is an attempt that
// failed (not recorded: its version is not handled).
func (r *modeRun) handler(name string) Handler {
	return func(ctx context.Context, it Item) error {
		r.startedOnce.Do(func() { close(r.started) })
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return r.log.handler(runBy(name, it.Slot, it.Token))(ctx, it)
	}
}

// runBy names a handler run by its worker and the lease it ran under: "A/1/2" (slot 1, token 2).
func runBy(name string, slot int, token int64) string {
	return fmt.Sprintf("%s/%d/%d", name, slot, token)
}

// leaseLost records a lease a worker lost: the runs under it may be cut short and run again.
func (r *modeRun) leaseLost(name string) func(LeaseEvent) {
	return func(e LeaseEvent) {
		if e.Kind == LeaseLost {
			r.mu.Lock()
			r.lost[runBy(name, e.Slot, e.Token)] = true
			r.mu.Unlock()
		}
	}
}

func (r *modeRun) set(i, n int) {
	setN(r.t, r.f, i, n)
	r.want[itemKey(i)] = n
}

func (r *modeRun) delete(i int) {
	_, err := r.f.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(r.f.table), Key: skey(itemKey(i))})
	require.NoError(r.t, err)
	delete(r.want, itemKey(i))
	r.deleted[itemKey(i)] = true
}

// waitFollowing waits until a worker reads the stream's shards (each worker's pass is complete:
// every latest value was handled, and the shard lease is held).
func (r *modeRun) waitFollowing() {
	require.Eventually(r.t, func() bool {
		for _, w := range r.workers {
			if fs := w.Stats().Follow; fs != nil {
				for _, sh := range fs.Shards {
					if sh.Owner != "" {
						return true
					}
				}
			}
		}
		return false
	}, 60*time.Second, 20*time.Millisecond, "a worker follows the stream")
}

// settle makes sure the stream is read and resolved to its end, so that a version handled again
// late (a record of the ledger's own write taken for a change, say) is in the log before the
// checks: a sentinel item written after every change is handled, and no batch waits; then a
// second one, after the completions of the first wave.
func (r *modeRun) settle() {
	for i := modeSentinels.lo; modeSentinels.has(i); i++ {
		r.f.seed(r.t, i, 1, nil)
		r.want[itemKey(i)] = i
		waitHandled(r.t, r.log, r.want)
		require.Eventually(r.t, func() bool {
			for _, w := range r.workers {
				if fs := w.Stats().Follow; fs == nil || fs.Lag > 0 {
					return false
				}
			}
			return true
		}, 30*time.Second, 20*time.Millisecond, "every batch of the stream resolved")
	}
	// A completion whose outcome stayed unknown (a fault) leaves its item claimed until the claim
	// expires (ClaimTTL), and the item is handled again then: a back-fill item is no candidate of
	// the stream that the lag above waits for.
	require.Eventually(r.t, func() bool {
		_, states := r.table()
		for id := range r.want {
			if states[id].Status != StatusDone {
				return false
			}
		}
		return true
	}, 40*time.Second, 100*time.Millisecond, "every item done, once any claim of unknown outcome has expired")
}

// check checks the handler runs, the ledger's completions and the table's end state.
func (r *modeRun) check() {
	t := r.t
	runs := r.log.snapshot()
	r.mu.Lock()
	lost := maps.Clone(r.lost)
	r.mu.Unlock()
	repeatable := map[string]bool{}
	if r.s.repeatable != nil {
		repeatable = r.s.repeatable()
	}
	versionN := map[string]int{} // the value each version handled had
	repeats := 0
	for id, rs := range runs {
		seen := map[int]string{} // value -> the lease of its first run
		for i, run := range rs {
			require.NotEmpty(t, run.version, "%s: the handler learns its version", id)
			versionN[run.version] = run.n
			if i > 0 {
				require.GreaterOrEqual(t, run.n, rs[i-1].n, "%s handled at %d after %d: %v", id, run.n, rs[i-1].n, rs)
			}
			if by, ok := seen[run.n]; ok {
				repeats++
				require.True(t, r.s.completeOnly || repeatable[id] || lost[by], "%s value %d handled twice, and no fault or lost lease explains it: %v", id, run.n, rs)
			}
			seen[run.n] = run.by
		}
		var i int
		_, _ = fmt.Sscanf(id, "item-%d", &i)
		switch {
		case modeRewrites.has(i) || modeDeletes.has(i):
			_, once := seen[i]
			require.True(t, once && len(seen) == 1, "%s: a rewrite of the same values or a delete is no new version: %v", id, rs)
		case modeBackfillDels.has(i):
			require.LessOrEqual(t, len(seen), 1, "%s deleted during the back-fill: %v", id, rs)
		}
	}
	t.Logf("handler runs of a value already handled: %d (items a fault explains: %d, leases lost: %d)", repeats, len(repeatable), len(lost))

	completions := r.completions()
	for id, vs := range completions {
		last := -1
		done := map[string]bool{}
		for _, v := range vs {
			require.False(t, done[v], "%s: version %s moved to done twice: completions %v, runs %v", id, v, vs, runs[id])
			done[v] = true
			n, ok := versionN[v]
			require.True(t, ok, "%s done at version %s, which no handler run was given: runs %v", id, v, runs[id])
			require.GreaterOrEqual(t, n, last, "%s done at %d after %d: completions %v, runs %v", id, n, last, vs, runs[id])
			last = n
		}
	}

	items, states := r.table()
	for id, n := range r.want {
		item, st := items[id], states[id]
		require.NotNil(t, item, "%s is gone", id)
		require.Equal(t, fmt.Sprint(n), item["n"].(*types.AttributeValueMemberN).Value, id)
		require.Equal(t, StatusDone, st.Status, "%s: %+v", id, st)
		require.Equal(t, r.ledger.ContentVersion(item), st.Version, "%s is done at the version of its content", id)
		require.NotEmpty(t, completions[id], "%s: the ledger's stream shows its completion", id)
	}
	for id := range r.deleted {
		require.Nil(t, items[id], "%s was deleted, and is back", id)
	}
	var handled int64
	for _, w := range r.workers {
		handled += w.Stats().Follow.Handled
	}
	require.Positive(t, handled, "versions were handled from the stream")
}

// table reads the table (consistent) and the items' states: what the run left.
func (r *modeRun) table() (map[string]map[string]types.AttributeValue, map[string]ItemState) {
	ctx := context.Background()
	var all []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(r.f.db, &dynamodb.ScanInput{TableName: aws.String(r.f.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(r.t, err)
		all = append(all, page.Items...)
	}
	states, err := r.ledger.States(ctx, all)
	require.NoError(r.t, err)
	items, byID := map[string]map[string]types.AttributeValue{}, map[string]ItemState{}
	for i, it := range all {
		id := it["id"].(*types.AttributeValueMemberS).Value
		items[id], byID[id] = it, states[i]
	}
	return items, byID
}

// completions reads the ledger's stream from its oldest record and returns, per item, the
// versions of the writes that moved it to done, in order (an item's records are in one shard).
func (r *modeRun) completions() map[string][]string {
	t, ctx, sc := r.t, context.Background(), streamsClient(r.t)
	prefix, keyOf := DefaultAttrPrefix, func(img map[string]types.AttributeValue) string {
		s, _ := img["id"].(*types.AttributeValueMemberS)
		if s == nil {
			return ""
		}
		return s.Value
	}
	if r.s.kind == LedgerTable {
		inline := keyOf
		prefix, keyOf = "", func(img map[string]types.AttributeValue) string {
			m, _ := img["key"].(*types.AttributeValueMemberM)
			if m == nil {
				return ""
			}
			return inline(m.Value)
		}
	}
	status := func(img map[string]types.AttributeValue, name string) string {
		s, _ := img[prefix+name].(*types.AttributeValueMemberS)
		if s == nil {
			return ""
		}
		return s.Value
	}
	d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(r.ledgerARN)})
	require.NoError(t, err)
	require.Nil(t, d.StreamDescription.LastEvaluatedShardId, "the test's stream lists its shards in one page")
	out := map[string][]string{}
	for _, sh := range lineage(d.StreamDescription.Shards) {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.ledgerARN),
			ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		require.NoError(t, err)
		for iter, empty := it.ShardIterator, 0; iter != nil && empty < 3; { // an open shard's end answers empty pages
			page, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			require.NoError(t, err)
			if empty++; len(page.Records) > 0 {
				empty = 0
			}
			for _, rec := range page.Records {
				if rec.Dynamodb == nil {
					continue
				}
				img, old := follow.Image(rec.Dynamodb.NewImage), follow.Image(rec.Dynamodb.OldImage)
				if status(img, "status") == string(StatusDone) && status(old, "status") != string(StatusDone) {
					id := keyOf(img)
					out[id] = append(out[id], status(img, "version"))
				}
			}
			iter = page.NextShardIterator
		}
	}
	return out
}

// lineage is shards with each parent before its children (an item's records go on in a child).
func lineage(shards []stypes.Shard) []stypes.Shard {
	byID := map[string]stypes.Shard{}
	for _, sh := range shards {
		byID[aws.ToString(sh.ShardId)] = sh
	}
	var out []stypes.Shard
	placed := map[string]bool{}
	var place func(id string)
	place = func(id string) {
		sh, ok := byID[id]
		if !ok || placed[id] {
			return
		}
		placed[id] = true
		place(aws.ToString(sh.ParentShardId))
		out = append(out, sh)
	}
	for _, sh := range shards {
		place(aws.ToString(sh.ShardId))
	}
	return out
}

// TestFollowModesFilter: the scenario in filter mode (each slot scans the table and keeps the
// items whose partition key maps to it), both ledgers.
func TestFollowModesFilter(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			runModeScenario(t, modeScenario{kind: kind, config: func(c *Config) { c.Mode = scan.ModeFilter }})
		})
	}
}

// TestFollowModesBatchClaims: the scenario with batched claims and completions (the pass claims a
// page's items 25 to a request; the completer completes handled items in batches, also those the
// stream's records brought), both ledgers.
func TestFollowModesBatchClaims(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			runModeScenario(t, modeScenario{kind: kind, config: func(c *Config) { c.BatchClaims = true }})
		})
	}
}

// TestFollowModesCompleteOnlyTable: the scenario complete-only with the table ledger (the inline
// ledger's is TestFollowTransformHandlesItsOutputOnce's). Without claims a pass and a reader may
// both run a version's handler (README); the ledger moves each version to done once, in order.
func TestFollowModesCompleteOnlyTable(t *testing.T) {
	runModeScenario(t, modeScenario{kind: LedgerTable, completeOnly: true, config: func(c *Config) { c.CompleteOnly = true }})
}

// ledgerFaults fails a share of one worker's ledger writes (every every-th write of the table that
// holds the ledger's state, of any write operation), taking the fault kinds in turn: lost answers
// (the write lands, the caller gets an error; also with the SDK's repeat, and held past the
// client's timeout) and failures that never land (throttling, HTTP 500, a refused connection).
// It remembers which items each faulted write named.
//
// Until the worker follows the stream only passBudget faults fire: a pass that meets a failed
// write is dirty, and a slot follows the stream only after a clean pass; the table ledger's pass
// writes a claim for every item, done or not (its state is not on the scanned item), so a fault
// every 7th write would keep it rescanning for ever. From then on, every followEvery-th write.
type ledgerFaults struct {
	fc          *ddbfault.Client
	table       string
	every       int64 // a fault every every-th ledger write during the pass
	followEvery int64 // and every followEvery-th once the worker follows the stream

	mu         sync.Mutex
	next       int                // the next kind, an index of faultKinds
	armed      bool               // a fault is armed
	following  bool               // the worker reads the stream
	passBudget int                // faults left before it does
	named      map[int64][]string // item ids each ledger write named, by call number
	hits       []ledgerFault
	followed   int // writes naming items sent while the worker followed the stream
}

// ledgerFault is a fault that fired, and whether its worker followed the stream then.
type ledgerFault struct {
	ddbfault.Injection
	following bool
}

var faultKinds = []ddbfault.Kind{ddbfault.LostAnswer, ddbfault.Throttle, ddbfault.LostAnswerRetried, ddbfault.ServerError,
	ddbfault.LostAnswerRetriedNoOld, ddbfault.ErrorBeforeSend, ddbfault.DelayedAnswer}

func newLedgerFaults(db ddbfault.Next, table string, every, followEvery int64, passBudget int) *ledgerFaults {
	lf := &ledgerFaults{fc: ddbfault.New(db), table: table, every: every, followEvery: followEvery, passBudget: passBudget, named: map[int64][]string{}}
	lf.fc.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		lf.mu.Lock()
		lf.named[c.N] = itemIDsOf(c.In)
		if lf.following && len(lf.named[c.N]) > 0 {
			lf.followed++
		}
		lf.mu.Unlock()
		return send(ctx, c.In)
	}, ddbfault.WriteOps...)
	lf.fc.OnInject(func(inj ddbfault.Injection) {
		lf.mu.Lock()
		defer lf.mu.Unlock()
		lf.hits = append(lf.hits, ledgerFault{Injection: inj, following: lf.following})
		lf.armed = false
		lf.armLocked()
	})
	lf.mu.Lock()
	lf.armLocked()
	lf.mu.Unlock()
	return lf
}

// armLocked arms the next fault kind at the every-th ledger write from now, unless one is armed
// or the pass's budget is spent. lf.mu is held.
func (lf *ledgerFaults) armLocked() {
	if lf.armed || !lf.following && lf.passBudget == 0 {
		return
	}
	if !lf.following {
		lf.passBudget--
	}
	k := faultKinds[lf.next%len(faultKinds)]
	lf.next++
	lf.armed = true
	at := lf.every
	if lf.following {
		at = lf.followEvery
	}
	lf.fc.Inject(ddbfault.Fault{Kind: k, At: at, Ops: ddbfault.WriteOps, Table: lf.table})
}

// startFollowing says the worker reads the stream: every followEvery-th write fails from now on.
func (lf *ledgerFaults) startFollowing() {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	lf.following = true
	lf.armLocked()
}

// faulted adds the items a faulted write named to into.
func (lf *ledgerFaults) faulted(into map[string]bool) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	for _, h := range lf.hits {
		for _, id := range lf.named[h.Call] {
			into[id] = true
		}
	}
}

// faultCount is the faults that fired: those whose write landed (lost answers) and those that
// never left, how many of them fired while the worker followed the stream, and the writes naming
// items it sent then.
type faultCount struct {
	applied, failed, following, followedWrites int
}

func (c faultCount) add(o faultCount) faultCount {
	return faultCount{c.applied + o.applied, c.failed + o.failed, c.following + o.following, c.followedWrites + o.followedWrites}
}

func (lf *ledgerFaults) count() faultCount {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	c := faultCount{followedWrites: lf.followed}
	for _, h := range lf.hits {
		if h.Fault.Kind.Applied() {
			c.applied++
		} else {
			c.failed++
		}
		if h.following {
			c.following++
		}
	}
	return c
}

// followSignal is a worker's streams client that tells on its first call that the worker follows
// the stream (only a following slot's reader calls it).
type followSignal struct {
	follow.StreamsClient
	once  sync.Once
	onUse func()
}

func (s *followSignal) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	s.once.Do(s.onUse)
	return s.StreamsClient.DescribeStream(ctx, in, opts...)
}

var itemIDPattern = regexp.MustCompile(`item-\d{6}`)

// itemIDsOf is the fixture item ids a write request names anywhere (keys, a table ledger row's
// key text, statement parameters).
func itemIDsOf(in any) []string {
	var out []string
	var walk func(v types.AttributeValue)
	walk = func(v types.AttributeValue) {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out = append(out, itemIDPattern.FindAllString(v.Value, -1)...)
		case *types.AttributeValueMemberM:
			for _, e := range v.Value {
				walk(e)
			}
		}
	}
	walkMap := func(m map[string]types.AttributeValue) {
		for _, v := range m {
			walk(v)
		}
	}
	switch in := in.(type) {
	case *dynamodb.UpdateItemInput:
		walkMap(in.Key)
	case *dynamodb.PutItemInput:
		walkMap(in.Item)
	case *dynamodb.DeleteItemInput:
		walkMap(in.Key)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Update != nil:
				walkMap(it.Update.Key)
			case it.Put != nil:
				walkMap(it.Put.Item)
			case it.Delete != nil:
				walkMap(it.Delete.Key)
			case it.ConditionCheck != nil:
				walkMap(it.ConditionCheck.Key)
			}
		}
	case *dynamodb.BatchExecuteStatementInput:
		for _, st := range in.Statements {
			for _, p := range st.Parameters {
				walk(p)
			}
		}
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range in.RequestItems {
			for _, rq := range reqs {
				if rq.PutRequest != nil {
					walkMap(rq.PutRequest.Item)
				}
				if rq.DeleteRequest != nil {
					walkMap(rq.DeleteRequest.Key)
				}
			}
		}
	}
	return out
}

// TestFollowModesLostAnswers: the scenario while the ledger writes of each worker (claims, renews,
// completions, batched or not, on the source table or the ledger table) fail, a few during the
// back-fill and every 4th once the worker follows the stream: a lost answer (landed), or a
// failure that never landed, the kinds in turn. A value is handled again only for an item a
// faulted write named (a claim whose completion failed expires and is handled again:
// at-least-once runs); the ledger still moves each version to done once, in order.
func TestFollowModesLostAnswers(t *testing.T) {
	for _, v := range []struct {
		name  string
		kind  LedgerKind
		batch bool
	}{{"inline", LedgerInline, false}, {"table", LedgerTable, false}, {"inline-batch", LedgerInline, true}, {"table-batch", LedgerTable, true}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			faults := map[string]*ledgerFaults{}
			of := func(name string) *ledgerFaults {
				mu.Lock()
				defer mu.Unlock()
				return faults[name]
			}
			runModeScenario(t, modeScenario{kind: v.kind,
				config: func(c *Config) {
					c.BatchClaims = v.batch
					if !v.batch {
						// A completion that never landed is claimed again once its claim
						// expires; batched completions may take seconds on DynamoDB Local.
						c.ClaimTTL = 5 * time.Second
					}
				},
				client: func(name string, f *fixture) DynamoDBClient {
					table := f.table
					if v.kind == LedgerTable {
						table = f.ledgerTable
					}
					lf := newLedgerFaults(f.db, table, 7, 4, 4)
					mu.Lock()
					faults[name] = lf
					mu.Unlock()
					return lf.fc
				},
				streams: func(name string) follow.StreamsClient {
					return &followSignal{StreamsClient: streamsClient(t), onUse: func() { of(name).startFollowing() }}
				},
				repeatable: func() map[string]bool {
					out := map[string]bool{}
					for _, name := range []string{"A", "B"} {
						of(name).faulted(out)
					}
					return out
				},
			})
			c := of("A").count().add(of("B").count())
			t.Logf("faults: %d lost answers, %d never landed, %d of them while following (of %d ledger writes then)",
				c.applied, c.failed, c.following, c.followedWrites)
			require.GreaterOrEqual(t, c.applied, 4, "lost answers")
			require.GreaterOrEqual(t, c.failed, 4, "failures that never landed")
			require.GreaterOrEqual(t, c.following, 4, "faults while following the stream")
		})
	}
}

// flakyStreams fails GetRecords transiently: every third call is throttled before it is sent,
// and every fifth is sent and its answer lost (the reader asks again with the same iterator).
type flakyStreams struct {
	follow.StreamsClient
	calls, failed, lost atomic.Int64
}

func (s *flakyStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	n := s.calls.Add(1)
	switch {
	case n%3 == 0:
		s.failed.Add(1)
		return nil, streamsError(&stypes.LimitExceededException{Message: aws.String("test: throttled")})
	case n%5 == 0:
		if _, err := s.StreamsClient.GetRecords(ctx, in, opts...); err != nil {
			return nil, err
		}
		s.lost.Add(1)
		return nil, streamsError(&stypes.InternalServerError{Message: aws.String("test: answer lost")})
	}
	return s.StreamsClient.GetRecords(ctx, in, opts...)
}

// streamsError is err as the SDK returns it.
func streamsError(err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB Streams", OperationName: "GetRecords", Err: err}
}

// TestFollowModesFlakyStream: the scenario while the stream's reads fail transiently (throttled,
// or answered and the answer lost), both ledgers: every version is handled once all the same.
func TestFollowModesFlakyStream(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			streams := map[string]*flakyStreams{}
			runModeScenario(t, modeScenario{kind: kind, streams: func(name string) follow.StreamsClient {
				s := &flakyStreams{StreamsClient: streamsClient(t)}
				mu.Lock()
				streams[name] = s
				mu.Unlock()
				return s
			}})
			var failed, lost int64
			for _, s := range streams {
				failed, lost = failed+s.failed.Load(), lost+s.lost.Load()
			}
			t.Logf("GetRecords failed %d times, answers lost %d times", failed, lost)
			require.Positive(t, failed)
			require.Positive(t, lost)
		})
	}
}

// TestFollowModesSlowBatchedCompletion: with BatchClaims a follower's completion is written by the
// completer after the handler returns. When it is slower than what is left of the claim (a queue
// of completions, a throttled or slow write; here each completion waits 1.5 s, ClaimTTL is 1 s),
// the follower must wait for its outcome: it looked at the item again at once, found it claimed
// by its own claim, claimed it again once that expired and ran the handler a second time, and
// again, until MaxAttempts dead-lettered the version (fixed in followStep).
func TestFollowModesSlowBatchedCompletion(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 1)
			_, _, err := follow.EnableStream(context.Background(), f.db, f.table)
			require.NoError(t, err)
			slow := ddbfault.New(f.db)
			slow.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
				if completesItem(c.In) {
					select {
					case <-time.After(1500 * time.Millisecond):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return send(ctx, c.In)
			}, ddbfault.OpUpdateItem, ddbfault.OpTransactWriteItems, ddbfault.OpBatchExecuteStatement)
			runs := newReviewRuns()
			gs := newReviewStreams(t, true, 0)
			w := startReview(t, f, kind, "A", gs, func(c *Config) { c.Client, c.BatchClaims, c.ClaimTTL = slow, true, time.Second },
				func(_ context.Context, it Item) error {
					runs.add("A", it, false)
					return nil
				})
			gs.following(t)
			setN(t, f, 0, 100)
			reviewWait(t, 30*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, kind, itemKey(0))
				return ok && w.resolved() >= 1, fmt.Sprintf("%s, resolved %d, runs %v", why, w.resolved(), runs.of(itemKey(0)))
			})
			w.stop()
			rs := runs.of(itemKey(0))
			require.Len(t, rs, 2, "the first version and the change, once each: %v", rs)
			require.Equal(t, []int{0, 100}, []int{rs[0].n, rs[1].n}, "%v", rs)
		})
	}
}

// completesItem reports a write that moves an item to done (a value "done" among its values).
func completesItem(in any) bool {
	done := func(vs map[string]types.AttributeValue) bool {
		for _, v := range vs {
			if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value == string(StatusDone) {
				return true
			}
		}
		return false
	}
	switch in := in.(type) {
	case *dynamodb.UpdateItemInput:
		return done(in.ExpressionAttributeValues)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			if it.Update != nil && done(it.Update.ExpressionAttributeValues) {
				return true
			}
		}
	case *dynamodb.BatchExecuteStatementInput:
		for _, st := range in.Statements {
			for _, p := range st.Parameters {
				if s, ok := p.(*types.AttributeValueMemberS); ok && s.Value == string(StatusDone) {
					return true
				}
			}
		}
	}
	return false
}
