package worker

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// TestCompleteOnlyWriteOfAReopenedVersionDoesNotLand: complete-only, following the stream, with
// effects (found by an adversarial review). Worker B's pass runs the handler of item X at its first
// version v1 (held). Worker A's stream reader handles v1 meanwhile (done at v1, its effects
// committed). X changes to v2: A reopens it (Renew: retry, a new claim id) and runs its handler on
// v2 (held). B's v1 handler then returns. Its complete-only write used to land on the reopened
// retry (only "unfinished" was required), finishing v2 with v1's run and committing v1's effects a
// second time. It is now refused (the versioned ledger requires the state B saw, ClaimRequest.Seen):
// every version's effects commit once, and X ends done at v2.
func TestCompleteOnlyWriteOfAReopenedVersionDoesNotLand(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) { testCompleteOnlyReopened(t, kind) })
	}
}

// reopenRun is the scenario's two handlers and the signals between them and the test.
type reopenRun struct {
	counters            string // one row per (item, n): how many commits its effects made
	mu                  sync.Mutex
	bHolding            map[string]bool // items whose v1 handler B's pass runs (held)
	aInV2               chan string     // A runs an item's v2 handler (held)
	releaseB, releaseA2 chan struct{}
	x                   *itemOf        // X, once chosen
	bWrote              chan ItemEvent // B's outcome for X (its handler returns only once released)
}

const reopenV2 = 1000 // the n that X's second version has

// handler holds B's v1 runs and A's v2 runs until released; every run returns one effect: an
// increment of its (item, n) row.
func (r *reopenRun) handler(by string) Handler {
	return WithEffects(func(hctx context.Context, it Item) (*Effects, error) {
		nv, _ := strconv.Atoi(it.Attrs["n"].(*types.AttributeValueMemberN).Value)
		id := keyID(it.Key)
		var hold chan struct{}
		switch {
		case by == "B" && nv < reopenV2:
			r.mu.Lock()
			r.bHolding[id] = true
			r.mu.Unlock()
			hold = r.releaseB
		case by == "A" && nv >= reopenV2:
			r.aInV2 <- id
			hold = r.releaseA2
		}
		if hold != nil {
			select {
			case <-hold:
			case <-hctx.Done():
				return nil, hctx.Err()
			}
		}
		return (&Effects{}).Update(r.counters, counterRow(id, nv), ledger.Add("commits", 1), ledger.Set("by_"+by, true)), nil
	})
}

// configB is the group's config, and B's report of its outcome for X.
func (r *reopenRun) configB(c *Config) {
	staleGroup(c)
	c.Hooks.OnItem = r.x.hook(r.bWrote)
}

// heldByB waits until B's pass holds an item's v1 handler: X.
func (r *reopenRun) heldByB(t *testing.T) string {
	var xid string
	reviewWait(t, 30*time.Second, func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for id := range r.bHolding {
			xid = id
			return true, ""
		}
		return false, "B's pass runs a handler"
	})
	r.x.Store(xid)
	return xid
}

func testCompleteOnlyReopened(t *testing.T, kind LedgerKind) {
	const n = 8
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	r := &reopenRun{counters: ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "id", Type: "S"}), bHolding: map[string]bool{},
		aInV2: make(chan string, n), releaseB: make(chan struct{}), releaseA2: make(chan struct{})}
	r.x, r.bWrote = outcomeOf()
	gs := newReviewStreams(t, false, 0)
	a := startReview(t, f, kind, "A", gs, staleGroup, r.handler("A"))
	gs.following(t)
	f.seed(t, 0, n, nil)
	b := startReview(t, f, kind, "B", newReviewStreams(t, false, 0), r.configB, r.handler("B"))
	xid := r.heldByB(t)
	xi, _ := strconv.Atoi(xid[len("item-"):])

	close(gs.open) // A's reader reads the inserts: handles X at v1
	reviewWait(t, 30*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, kind, xid) })
	setN(t, f, xi, reopenV2) // v2: A renews X and runs its handler on v2 (held)
	select {
	case id := <-r.aInV2:
		require.Equal(t, xid, id)
	case <-time.After(30 * time.Second):
		t.Fatal("A did not run X's v2 handler")
	}
	_, reopened, _ := reviewVersionedState(t, f, kind, xid)
	require.Equal(t, StatusRetry, reopened.Status, "A reopened X for v2: %+v", reopened)

	close(r.releaseB) // B's v1 write, prepared before the reopen
	select {
	case e := <-r.bWrote:
		require.Equal(t, OutcomeSkipped, e.Outcome, "B's v1 write is refused")
	case <-time.After(30 * time.Second):
		t.Fatal("B's v1 handler returned without an outcome")
	}
	_, after, _ := reviewVersionedState(t, f, kind, xid)
	require.Equal(t, reopened, after, "X is still as A's renew left it")
	close(r.releaseA2)

	reviewWait(t, 60*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, kind, xid) })
	a.stop() // Run returns once its writes in flight are settled
	b.stop()
	requireCommitsOnce(t, f.db, r.counters, xid, xi, reopenV2)
}
