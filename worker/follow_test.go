package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// versionLog records every handler run of a follow test: which worker handled which value of
// "n" of which item, in order.
type versionLog struct {
	mu   sync.Mutex
	runs map[string][]handledRun
}

type handledRun struct {
	by      string
	n       int
	version string // Item.Version
}

func (v *versionLog) handler(by string) Handler {
	return func(_ context.Context, it Item) error {
		n, _ := strconv.Atoi(it.Attrs["n"].(*types.AttributeValueMemberN).Value)
		v.mu.Lock()
		defer v.mu.Unlock()
		v.runs[keyID(it.Key)] = append(v.runs[keyID(it.Key)], handledRun{by: by, n: n, version: it.Version})
		return nil
	}
}

// latest reports whether every item of want (id -> n) has had its value n handled.
func (v *versionLog) latest(want map[string]int) (missing string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, n := range want {
		runs := v.runs[id]
		if len(runs) == 0 || runs[len(runs)-1].n != n {
			return fmt.Sprintf("%s: want %d handled, runs %v", id, n, runs)
		}
	}
	return ""
}

func (v *versionLog) snapshot() map[string][]handledRun {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string][]handledRun{}
	for k, r := range v.runs {
		out[k] = append([]handledRun(nil), r...)
	}
	return out
}

func streamsClient(t testing.TB) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(ddbtest.Config(t), func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(ddbtest.Endpoint(t))
	})
}

// TestFollowEveryVersionOnce: two workers back-fill a table while its items change, then follow its
// stream through inserts, quick successive updates, rewrites that change nothing and deletes, and
// one of them dies (every call it makes fails from then on, as after a SIGKILL) in the middle.
// Every item's latest version is handled; no item is handled at a value older than one handled
// before it; values are handled once, but for runs of the dead worker repeated by the other;
// rewrites, the ledger's own writes and deleted items are not handled again.
func TestFollowEveryVersionOnce(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
			t.Run(string(kind), func(t *testing.T) {
				testFollow(t, kind)
			})
		}
	})
}

func testFollow(t *testing.T, kind LedgerKind) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const seeded = 200
	f := newFixture(t, seeded)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	log := &versionLog{runs: map[string][]handledRun{}}
	want := map[string]int{}
	for i := range seeded {
		want[itemKey(i)] = i
	}
	a := newCrashable(f.db)
	workers := map[string]*Worker{}
	start := func(name string, db DynamoDBClient) <-chan error {
		cfg := f.config(kind)
		cfg.Client, cfg.Owner, cfg.Workers, cfg.Follow, cfg.Streams = db, name, 2, true, streamsClient(t)
		cfg.StreamPoll, cfg.LeaseTTL, cfg.Heartbeat, cfg.MaxClockSkew, cfg.ClaimTTL = 50*time.Millisecond, 3*time.Second, time.Second, 100*time.Millisecond, 3*time.Second
		w, err := New(cfg)
		require.NoError(t, err)
		workers[name] = w
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx, log.handler(name)) }()
		return done
	}
	doneA, doneB := start("A", a), start("B", f.db)
	// Changes while the backfill runs.
	for i := range 40 {
		setN(t, f, i, i+1000)
		want[itemKey(i)] = i + 1000
	}
	waitHandled(t, log, want)

	// Following: inserts, quick successive updates, rewrites of the same values, deletes; A dies.
	f.seed(t, seeded, 30, nil)
	for i := seeded; i < seeded+30; i++ {
		want[itemKey(i)] = i
	}
	// A dies before the updates, so that B must read their records (A used to die after them,
	// and once handled every change first: B read none, and a fresh-clone CI run failed).
	a.dead.Store(true)
	for i := 50; i < 70; i++ {
		for step := 1; step <= 3; step++ {
			setN(t, f, i, i+step*10_000)
		}
		want[itemKey(i)] = i + 30_000
	}
	for i := 70; i < 90; i++ {
		setN(t, f, i, i) // no new content
	}
	for i := 90; i < 100; i++ {
		_, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: skey(itemKey(i))})
		require.NoError(t, err)
		delete(want, itemKey(i))
	}
	waitHandled(t, log, want)
	fb := workers["B"].Stats().Follow
	require.NotEmpty(t, fb.Shards, "B reads the stream once A is dead")
	require.Positive(t, fb.Records)
	fa := workers["A"].Stats().Follow
	require.Positive(t, fa.Handled+fb.Handled, "versions were handled from the stream: A %+v, B %+v", fa, fb)
	cancel()
	<-doneA
	if err := <-doneB; !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}
	checkFollowRuns(t, log.snapshot())
}

// checkFollowRuns checks every item's runs: values never handled after a newer one, each value
// handled once unless the dead worker A ran it, and the unchanged and deleted items once only.
func checkFollowRuns(t *testing.T, runs map[string][]handledRun) {
	for id, rs := range runs {
		seen := map[int]string{}
		for i, r := range rs {
			if i > 0 {
				require.GreaterOrEqual(t, r.n, rs[i-1].n, "%s handled at %d after %d: %v", id, r.n, rs[i-1].n, rs)
			}
			require.NotEmpty(t, r.version, "%s: the handler learns its version", id)
			if by, ok := seen[r.n]; ok {
				require.True(t, by == "A" || r.by == "A", "%s value %d handled twice, not for a dead worker: %v", id, r.n, rs)
			}
			seen[r.n] = r.by
		}
		var i int
		_, _ = fmt.Sscanf(id, "item-%d", &i)
		if i >= 70 && i < 100 {
			require.Len(t, seen, 1, "%s: a rewrite of the same values or a delete is no new version: %v", id, rs)
		}
	}
}

func setN(t *testing.T, f *fixture, i, n int) {
	require.NoError(t, f.setN(i, n))
}

// setN sets item i's n; for goroutines other than the test's.
func (f *fixture) setN(i, n int) error {
	_, err := f.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(f.table), Key: skey(itemKey(i)), UpdateExpression: aws.String("SET n = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.Itoa(n)}},
	})
	return err
}

func waitHandled(t *testing.T, log *versionLog, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		missing := log.latest(want)
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every latest version was handled: %s", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFollowTransformHandlesItsOutputOnce: a follower whose handler transforms the item through an
// item effect (seen := n, a counter added to) records the content the effect leaves as the version
// handled, so the stream's record of that very write is no new version: each change is handled
// once, not again and again. With claims and complete-only, both ledgers.
func TestFollowTransformHandlesItsOutputOnce(t *testing.T) {
	for _, v := range []struct {
		name     string
		kind     LedgerKind
		complete bool
	}{{"inline", LedgerInline, false}, {"inline-complete-only", LedgerInline, true}, {"table", LedgerTable, false}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			testFollowTransform(t, v.kind, v.complete)
		})
	}
}

func testFollowTransform(t *testing.T, kind LedgerKind, completeOnly bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFixture(t, 30)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	log := &versionLog{runs: map[string][]handledRun{}}
	record := log.handler("w")
	h := WithEffects(func(ctx context.Context, it Item) (*ledger.Effects, error) {
		if err := record(ctx, it); err != nil {
			return nil, err
		}
		return new(ledger.Effects).Item(ledger.Set("seen", it.Attrs["n"]), ledger.Add("runs", 1), ledger.Add("total", 0.25)), nil
	})
	cfg := f.config(kind)
	cfg.Workers, cfg.Follow, cfg.Streams, cfg.StreamPoll, cfg.CompleteOnly = 1, true, streamsClient(t), 50*time.Millisecond, completeOnly
	w, err := New(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, h) }()
	want := map[string]int{}
	for i := range 30 {
		want[itemKey(i)] = i
	}
	waitHandled(t, log, want)
	for i := range 10 {
		setN(t, f, i, 100+i)
		want[itemKey(i)] = 100 + i
	}
	waitHandled(t, log, want)
	// Let the stream bring the effects' own writes, then look: nothing more was handled. Records
	// >= 40 held before the last completions' records were read (the pass's own completions are
	// 30 more records): a marker written once every change's completion landed comes after them.
	reviewWait(t, 30*time.Second, func() (bool, string) {
		for i := range 10 {
			if _, st, _ := reviewVersionedState(t, f, kind, itemKey(i)); st.Status != StatusDone {
				return false, fmt.Sprintf("%s's change completed: %+v", itemKey(i), st)
			}
		}
		return true, ""
	})
	f.seed(t, 30, 1, nil)
	want[itemKey(30)] = 30
	waitHandled(t, log, want)
	require.Eventually(t, func() bool {
		fs := w.Stats().Follow
		return fs != nil && fs.Lag == 0
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	<-done
	for id, rs := range log.snapshot() {
		var i int
		_, _ = fmt.Sscanf(id, "item-%d", &i)
		if i < 10 {
			require.Len(t, rs, 2, "%s: its first version and its change, once each: %v", id, rs)
		} else {
			require.Len(t, rs, 1, "%s: %v", id, rs)
		}
	}
}
