package worker

import (
	"context"
	"fmt"
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

func testCompleteOnlyReopened(t *testing.T, kind LedgerKind) {
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	counters := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "id", Type: "S"})

	const n = 8
	const v2 = 1000
	var mu sync.Mutex
	bHolding := map[string]bool{} // items whose v1 handler B's pass is running
	aInV2 := make(chan string, n)
	releaseB := make(chan struct{})
	releaseA2 := make(chan struct{})

	handler := func(by string) Handler {
		return WithEffects(func(hctx context.Context, it Item) (*Effects, error) {
			nv, _ := strconv.Atoi(it.Attrs["n"].(*types.AttributeValueMemberN).Value)
			id := keyID(it.Key)
			if by == "B" && nv < v2 {
				mu.Lock()
				bHolding[id] = true
				mu.Unlock()
				select {
				case <-releaseB:
				case <-hctx.Done():
					return nil, hctx.Err()
				}
			}
			if by == "A" && nv >= v2 {
				aInV2 <- id
				select {
				case <-releaseA2:
				case <-hctx.Done():
					return nil, hctx.Err()
				}
			}
			// One commit per version: a counter per (item, n) in another table.
			e := &Effects{}
			e.Update(counters, ledger.Key{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#%d", id, nv)}},
				ledger.Add("commits", 1), ledger.Set("by_"+by, true))
			return e, nil
		})
	}

	group := func(c *Config) { c.Workers, c.PollInterval, c.CompleteOnly = 2, time.Minute, true }
	var x atomic.Value // X's id, once chosen
	x.Store("")
	bWrote := make(chan ItemEvent, 1) // B's outcome for X once its v1 handler returned
	var released atomic.Bool
	groupB := func(c *Config) {
		group(c)
		c.Hooks.OnItem = func(e ItemEvent) {
			if released.Load() && keyID(e.Key) == x.Load().(string) {
				select {
				case bWrote <- e:
				default:
				}
			}
		}
	}
	gs := newReviewStreams(t, false, 0)
	a := startReview(t, f, kind, "A", gs, group, handler("A"))
	gs.following(t)
	f.seed(t, 0, n, nil)
	b := startReview(t, f, kind, "B", newReviewStreams(t, false, 0), groupB, handler("B"))

	var xid string
	reviewWait(t, 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for id := range bHolding {
			xid = id
			return true, ""
		}
		return false, "B's pass runs a handler"
	})
	x.Store(xid)
	xi, _ := strconv.Atoi(xid[len("item-"):])
	t.Logf("X = %s (B's pass holds its v1 handler)", xid)

	close(gs.open) // A's reader reads the inserts: handles X at v1
	reviewWait(t, 30*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, kind, xid) })

	setN(t, f, xi, v2) // v2: A renews X and runs its handler on v2 (held)
	select {
	case id := <-aInV2:
		require.Equal(t, xid, id)
	case <-time.After(30 * time.Second):
		t.Fatal("A did not run X's v2 handler")
	}
	_, stR, _ := reviewVersionedState(t, f, kind, xid)
	require.Equal(t, StatusRetry, stR.Status, "A reopened X for v2: %+v", stR)

	released.Store(true)
	close(releaseB) // B's v1 write, prepared before the reopen
	select {
	case e := <-bWrote:
		require.Equal(t, OutcomeSkipped, e.Outcome, "B's v1 write is refused")
	case <-time.After(30 * time.Second):
		t.Fatal("B's v1 handler returned without an outcome")
	}
	_, stB, _ := reviewVersionedState(t, f, kind, xid)
	require.Equal(t, StatusRetry, stB.Status, "still reopened for v2: %+v", stB)
	require.Equal(t, stR.Claim, stB.Claim, "as A's renew left it: %+v", stB)
	close(releaseA2)

	reviewWait(t, 60*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, kind, xid) })
	a.stop() // Run returns once its writes in flight are settled
	b.stop()
	for _, nv := range []int{xi, v2} {
		out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(counters),
			Key: ledger.Key{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#%d", xid, nv)}}, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Equal(t, &types.AttributeValueMemberN{Value: "1"}, out.Item["commits"], "%s: the effects of n=%d commit once: %v", xid, nv, out.Item)
	}
}
