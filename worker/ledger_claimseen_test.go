package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
)

// readCounter counts the reads a ledger makes.
type readCounter struct {
	*dynamodb.Client
	reads atomic.Int64
}

func (c *readCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.reads.Add(1)
	return c.Client.GetItem(ctx, in, o...)
}

func (c *readCounter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.reads.Add(1)
	return c.Client.BatchGetItem(ctx, in, o...)
}

// TestClaimWithSeenAttempts: a claim transaction whose requests saw the items' attempt counts (the
// inline ledger's batched claims) learns the new attempts without reading them back, and a count
// that moved since the scan costs no claim: the item is claimed anyway, with the stored attempt.
func TestClaimWithSeenAttempts(t *testing.T) {
	f := newFixture(t, 4)
	rc := &readCounter{Client: f.db}
	led, err := NewInlineLedger(rc, f.table, []string{"id"}, InlineOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now()
	// Item 1 is claimed twice (the first claim expires): attempts 2, claim expired by `later`.
	for i := range 2 {
		at := now.Add(time.Duration(i) * 2 * time.Second)
		o, err := led.Claim(ctx, []ClaimRequest{{Key: skey(itemKey(1)), Owner: "x", Slot: 0, Token: 1, Now: at, Until: at.Add(time.Second)}})
		require.NoError(t, err)
		require.True(t, o[0].Claimed)
		require.Equal(t, i+1, o[0].Claim.Attempt)
	}
	later := now.Add(10 * time.Second)
	req := func(i, seen int) ClaimRequest {
		return ClaimRequest{Key: skey(itemKey(i)), Owner: "a", Slot: 0, Token: 1, Now: later, Until: later.Add(time.Minute), seen: true, seenAttempts: seen}
	}
	rc.reads.Store(0)
	// Items 0, 2 and 3 as scanned (no attempts); item 1 as an older scan saw it (1, not 2).
	outs, err := led.Claim(ctx, []ClaimRequest{req(0, 0), req(1, 1), req(2, 0), req(3, 0)})
	require.NoError(t, err)
	// One read: the moved count's item, claimed again in a transaction without the expectation,
	// is read back; the counts that held were not.
	require.EqualValues(t, 1, rc.reads.Load())
	want := []int{1, 3, 1, 1}
	for i, o := range outs {
		require.True(t, o.Claimed, "item %d", i)
		require.Equal(t, want[i], o.Claim.Attempt, "item %d", i)
		st, err := led.State(ctx, o.Claim.Key)
		require.NoError(t, err)
		require.Equal(t, want[i], st.Attempts, "item %d: the claim's attempt is the stored one", i)
		require.Equal(t, "a", st.Owner)
	}

	// A request that saw a count but finds the item done is refused, not retried without end.
	require.NoError(t, led.Complete(ctx, outs[0].Claim, later))
	r2 := req(2, 5) // another worker with a wrong count: item 2 is a's live claim
	r2.Owner = "b"
	o, err := led.Claim(ctx, []ClaimRequest{req(0, 0), r2})
	require.NoError(t, err)
	require.False(t, o[0].Claimed)
	require.Equal(t, StatusDone, o[0].Status)
	require.False(t, o[1].Claimed)
	require.Equal(t, StatusClaimed, o[1].Status)
}

// TestClaimWithSeenAttemptsReadsNothing: when every count holds, a claim transaction reads nothing.
func TestClaimWithSeenAttemptsReadsNothing(t *testing.T) {
	f := newFixture(t, 25)
	rc := &readCounter{Client: f.db}
	led, err := NewInlineLedger(rc, f.table, []string{"id"}, InlineOptions{})
	require.NoError(t, err)
	now := time.Now()
	reqs := make([]ClaimRequest, 25)
	for i := range reqs {
		reqs[i] = ClaimRequest{Key: skey(itemKey(i)), Owner: "a", Slot: 0, Token: 1, Now: now, Until: now.Add(time.Minute), seen: true}
	}
	outs, err := led.Claim(context.Background(), reqs)
	require.NoError(t, err)
	require.Zero(t, rc.reads.Load())
	for i, o := range outs {
		require.True(t, o.Claimed, "item %d", i)
		require.Equal(t, 1, o.Claim.Attempt)
	}
}

// TestClaimFreshMoved: a request that saw no state (fresh) claims under "no status"; an item
// that has gained a state since is claimed under the general condition, alone (UpdateItem) and in
// a transaction, with the stored attempt; a live claim of another worker stays refused.
func TestClaimFreshMoved(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 4)
			led := f.ledger(t, kind, "")
			ctx := context.Background()
			now := time.Now()
			for _, i := range []int{0, 2, 3} { // expired claims of x on items 0 and 2; a live one on 3
				until := now.Add(time.Second)
				if i == 3 {
					until = now.Add(time.Hour)
				}
				o, err := led.Claim(ctx, []ClaimRequest{{Key: skey(itemKey(i)), Owner: "x", Slot: 0, Token: 1, Now: now, Until: until}})
				require.NoError(t, err)
				require.True(t, o[0].Claimed)
			}
			later := now.Add(10 * time.Second)
			fresh := func(i int, seen bool) ClaimRequest {
				return ClaimRequest{Key: skey(itemKey(i)), Owner: "a", Slot: 0, Token: 1, Now: later, Until: later.Add(time.Minute), fresh: true, seen: seen}
			}
			one, err := led.Claim(ctx, []ClaimRequest{fresh(0, false)})
			require.NoError(t, err)
			require.True(t, one[0].Claimed, "alone")
			require.Equal(t, 2, one[0].Claim.Attempt)
			outs, err := led.Claim(ctx, []ClaimRequest{fresh(1, true), fresh(2, true), fresh(3, true)})
			require.NoError(t, err)
			require.True(t, outs[0].Claimed)
			require.Equal(t, 1, outs[0].Claim.Attempt)
			require.True(t, outs[1].Claimed, "in a transaction")
			require.Equal(t, 2, outs[1].Claim.Attempt)
			require.False(t, outs[2].Claimed, "x's live claim")
			require.Equal(t, StatusClaimed, outs[2].Status)
			for i, cl := range []Claim{one[0].Claim, outs[0].Claim, outs[1].Claim} {
				st, err := led.State(ctx, cl.Key)
				require.NoError(t, err)
				require.Equal(t, cl.Attempt, st.Attempts, "claim %d: the claim's attempt is the stored one", i)
				require.Equal(t, "a", st.Owner)
				require.NoError(t, led.Complete(ctx, cl, later), "claim %d is current", i)
			}
		})
	}
}

// TestCompleteOnlyFreshMoved: a complete-only write for an item the scan saw without state
// requires "no status yet"; an item that gained a state since is decided by the general
// condition: completed when it is in retry or claimed, refused when it is done.
func TestCompleteOnlyFreshMoved(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 3)
			led := f.ledger(t, kind, "")
			ctx := context.Background()
			now := time.Now()
			o, err := led.Claim(ctx, []ClaimRequest{{Key: skey(itemKey(1)), Owner: "x", Slot: 0, Token: 1, Now: now, Until: now.Add(time.Second)}})
			require.NoError(t, err)
			require.True(t, o[0].Claimed)
			o, err = led.Claim(ctx, []ClaimRequest{{Key: skey(itemKey(2)), Owner: "x", Slot: 0, Token: 1, Now: now, Until: now.Add(time.Second)}})
			require.NoError(t, err)
			require.NoError(t, led.Complete(ctx, o[0].Claim, now))
			want := []bool{true, true, false} // fresh; claimed since the scan; done since the scan
			for i, w := range want {
				r := ClaimRequest{Key: skey(itemKey(i)), Owner: "a", Slot: 0, Token: 1, Now: now, Until: now, statusOnly: true, fresh: true}
				done, err := led.CompleteOnly(ctx, r)
				require.NoError(t, err)
				require.Equal(t, w, done, "item %d", i)
				st, err := led.State(ctx, r.Key)
				require.NoError(t, err)
				require.Equal(t, StatusDone, st.Status, "item %d", i)
			}
		})
	}
}
