package worker

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// Complete-only, following the stream, with effects: a pass's scanned content is older than a
// state it reads afterwards. Both scenarios were found by an adversarial review of the fence on the
// state seen (ClaimRequest.Seen): the pass ran the handler on its old content under the newer
// state, and its write landed, committing an older version's effects a second time. The pass now
// handles the content read after that state.

// countingRuns is the scenarios' handler: every run commits one increment of its (item, n) row in
// counters; A's runs of n >= holdFrom report the item on held and wait for release.
type countingRuns struct {
	counters string
	holdFrom int
	held     chan string
	release  chan struct{}
}

func newCountingRuns(t *testing.T, db *dynamodb.Client, holdFrom, n int) *countingRuns {
	return &countingRuns{counters: ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"}), holdFrom: holdFrom,
		held: make(chan string, n), release: make(chan struct{})}
}

func (c *countingRuns) handler(by string) Handler {
	return WithEffects(func(hctx context.Context, it Item) (*Effects, error) {
		nv, _ := strconv.Atoi(it.Attrs["n"].(*types.AttributeValueMemberN).Value)
		id := keyID(it.Key)
		if by == "A" && nv >= c.holdFrom {
			c.held <- id
			select {
			case <-c.release:
			case <-hctx.Done():
				return nil, hctx.Err()
			}
		}
		return (&Effects{}).Update(c.counters, counterRow(id, nv), ledger.Add("commits", 1), ledger.Set("by_"+by, true)), nil
	})
}

// waitHeld waits until A holds n runs.
func (c *countingRuns) waitHeld(t *testing.T, n int) []string {
	var ids []string
	for range n {
		select {
		case id := <-c.held:
			ids = append(ids, id)
		case <-time.After(30 * time.Second):
			t.Fatalf("A holds %d runs, want %d", len(ids), n)
		}
	}
	return ids
}

// requireOnce requires that the effects of item id's runs at each n committed once.
func (c *countingRuns) requireOnce(t *testing.T, db *dynamodb.Client, id string, ns ...int) {
	requireCommitsOnce(t, db, c.counters, id, ns...)
}

// counterRow is the row of counters that item id's runs at n count their commits in.
func counterRow(id string, n int) ledger.Key {
	return ledger.Key{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#%d", id, n)}}
}

// requireCommitsOnce requires that the effects of item id's runs at each n committed once.
func requireCommitsOnce(t *testing.T, db *dynamodb.Client, counters, id string, ns ...int) {
	t.Helper()
	for _, nv := range ns {
		out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(counters),
			Key: counterRow(id, nv), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Equal(t, &types.AttributeValueMemberN{Value: "1"}, out.Item["commits"], "%s: the effects of n=%d commit once: %v", id, nv, out.Item)
	}
}

func staleGroup(c *Config) { c.Workers, c.PollInterval, c.CompleteOnly = 2, time.Minute, true }

// rowReadGate holds a worker's first BatchGetItem of the ledger table (the table ledger's
// completeOnlyStates) until gate is closed, and reports the items it asks for on hit.
type rowReadGate struct {
	*dynamodb.Client
	table string
	once  sync.Once
	hit   chan []string
	gate  chan struct{}
}

var itemIDIn = regexp.MustCompile(`item-[0-9]{6}`)

func (g *rowReadGate) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if ka, ok := in.RequestItems[g.table]; ok {
		first := false
		g.once.Do(func() { first = true })
		if first {
			var ids []string
			for _, k := range ka.Keys {
				if pk, ok := k["pk"].(*types.AttributeValueMemberS); ok {
					ids = append(ids, itemIDIn.FindString(pk.Value))
				}
			}
			g.hit <- ids
			<-g.gate
		}
	}
	return g.Client.BatchGetItem(ctx, in, opts...)
}

// TestCompleteOnlyTablePassHandlesContentReadAfterTheRow: table ledger. B's pass reads a page
// with X at v1; before it reads X's row, A's reader finishes v1, X changes to v2, and A reopens it
// and runs v2 (held). B then reads the reopened row. It used to run the page's v1 under that
// state, and its write landed (v1's effects twice); it now reads X again after the row and runs
// v2, whose effects, like v1's, commit once.
func TestCompleteOnlyTablePassHandlesContentReadAfterTheRow(t *testing.T) {
	const n, v2 = 8, 1000
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	runs := newCountingRuns(t, f.db, v2, n)
	gate := &rowReadGate{Client: f.db, table: f.ledgerTable, hit: make(chan []string, 1), gate: make(chan struct{})}
	gs := newReviewStreams(t, false, 0)
	a := startReview(t, f, LedgerTable, "A", gs, staleGroup, runs.handler("A"))
	gs.following(t)
	f.seed(t, 0, n, nil)
	x, bDone := outcomeOf()
	b := startReview(t, f, LedgerTable, "B", newReviewStreams(t, false, 0), func(c *Config) {
		staleGroup(c)
		c.Client, c.Hooks.OnItem = gate, x.hook(bDone)
	}, runs.handler("B"))
	ids := waitOn(t, gate.hit, "B's pass read no rows")
	require.NotEmpty(t, ids)
	xid := ids[0]
	x.Store(xid)
	xi, _ := strconv.Atoi(xid[len("item-"):])

	close(gs.open) // A's reader handles v1
	reviewWait(t, 30*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, LedgerTable, xid) })
	setN(t, f, xi, v2) // A reopens X and runs v2 (held)
	require.Equal(t, []string{xid}, runs.waitHeld(t, 1))
	close(gate.gate) // B reads the rows now: X is the reopened retry
	t.Logf("B's outcome for %s: %s", xid, waitOn(t, bDone, "B gave no outcome for X").Outcome)
	close(runs.release)
	reviewWait(t, 60*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, LedgerTable, xid) })
	a.stop() // Run returns once its writes in flight are settled
	b.stop()
	runs.requireOnce(t, f.db, xid, xi, v2)
}

// renewScanGates holds a worker's first renew (an UpdateItem with :zero and :prev: attempts 0, on
// the claim id read) until renewGo, and reports its item on renewHit; with gateScan, also its
// first Scan until scanGo.
type renewScanGates struct {
	*dynamodb.Client
	renewOnce, scanOnce sync.Once
	renewHit            chan string
	scanHit             chan struct{}
	renewGo, scanGo     chan struct{}
	gateScan            bool
}

func newRenewScanGates(db *dynamodb.Client, gateScan bool) *renewScanGates {
	return &renewScanGates{Client: db, renewHit: make(chan string, 1), scanHit: make(chan struct{}),
		renewGo: make(chan struct{}), scanGo: make(chan struct{}), gateScan: gateScan}
}

func (g *renewScanGates) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	_, zero := in.ExpressionAttributeValues[":zero"]
	_, prev := in.ExpressionAttributeValues[":prev"]
	if zero && prev {
		g.renewOnce.Do(func() {
			g.renewHit <- keyID(in.Key)
			<-g.renewGo
		})
	}
	return g.Client.UpdateItem(ctx, in, opts...)
}

func (g *renewScanGates) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if g.gateScan {
		g.scanOnce.Do(func() {
			close(g.scanHit)
			<-g.scanGo
		})
	}
	return g.Client.Scan(ctx, in, opts...)
}

// waitOn waits for ch, or fails the test with what.
func waitOn[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
	var zero T
	return zero
}

// TestCompleteOnlyInlinePassHandlesContentReadAfterARefusedRenew: inline ledger. B's pass reads a
// page with X at v2, its state done at v1 (every item is, X is the one B renews first). A reopens
// X and finishes v2, X changes to v3, and A reopens it again and runs v3 (held). B's renew of the state it scanned is refused, and it reads
// X again (afterRefusedRenew). It used to run its page's v2 under the state read (v2's effects
// twice); it now runs the v3 it read, whose effects, like v2's, commit once.
func TestCompleteOnlyInlinePassHandlesContentReadAfterARefusedRenew(t *testing.T) {
	const n, v2, v3 = 4, 1000, 2000
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	runs := newCountingRuns(t, f.db, v3, n)
	aGates, bGates := newRenewScanGates(f.db, false), newRenewScanGates(f.db, true)
	gs := newReviewStreams(t, false, 0)
	a := startReview(t, f, LedgerInline, "A", gs, func(c *Config) { staleGroup(c); c.Client = aGates }, runs.handler("A"))
	gs.following(t)
	f.seed(t, 0, n, nil)
	close(gs.open) // A's reader handles every item at its v1
	waitAllDone(t, f, LedgerInline, n)
	x, bDone := outcomeOf() // for the item of B's held renew
	b := startReview(t, f, LedgerInline, "B", newReviewStreams(t, false, 0), func(c *Config) {
		staleGroup(c)
		c.Client, c.Hooks.OnItem = bGates, x.hook(bDone)
	}, runs.handler("B"))
	waitOn(t, bGates.scanHit, "B does not scan")
	for i := range n { // every item at v2: A's reader reopens the first and is held there
		setN(t, f, i, v2+i)
	}
	waitOn(t, aGates.renewHit, "A does not renew")
	close(bGates.scanGo) // B's page: v2, done at v1; B's first renew, of X, is held
	xid := waitOn(t, bGates.renewHit, "B does not renew")
	x.Store(xid)
	xi, _ := strconv.Atoi(xid[len("item-"):])
	close(aGates.renewGo) // A reopens and finishes every v2
	waitAllDone(t, f, LedgerInline, n)
	setN(t, f, xi, v3+xi) // X at v3: A reopens it and holds its run
	require.Equal(t, []string{xid}, runs.waitHeld(t, 1))
	close(bGates.renewGo) // B's held renew is refused: it reads X again
	e := waitOn(t, bDone, "B gave no outcome for the item of its held renew")
	close(runs.release)
	waitAllDone(t, f, LedgerInline, n)
	a.stop()
	b.stop()
	t.Logf("B's outcome for %s: %s", xid, e.Outcome)
	for i := range n {
		runs.requireOnce(t, f.db, itemKey(i), i, v2+i)
	}
	runs.requireOnce(t, f.db, xid, v3+xi)
}

// itemOf is an item id chosen while the workers run; hook reports a worker's first outcome for
// it (a claim is no outcome) on a channel.
type itemOf struct{ atomic.Value }

func outcomeOf() (*itemOf, chan ItemEvent) {
	x := &itemOf{}
	x.Store("")
	return x, make(chan ItemEvent, 1)
}

func (x *itemOf) hook(ch chan ItemEvent) func(ItemEvent) {
	return func(e ItemEvent) {
		if keyID(e.Key) == x.Load().(string) && e.Outcome != OutcomeClaimed {
			select {
			case ch <- e:
			default:
			}
		}
	}
}

// waitAllDone waits until items 0..n-1 are done at their current content.
func waitAllDone(t *testing.T, f *fixture, kind LedgerKind, n int) {
	for i := range n {
		id := itemKey(i)
		reviewWait(t, 60*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, kind, id) })
	}
}
