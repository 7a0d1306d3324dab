package ledger

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// readCounter is a client that counts the reads a claim makes to learn attempt numbers.
type readCounter struct {
	*ddbfault.Client
	reads atomic.Int64
}

func newReadCounter(db ddbfault.Next) *readCounter {
	c := &readCounter{Client: ddbfault.New(db)}
	c.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		c.reads.Add(1)
		return send(ctx, call.In)
	}, ddbfault.OpGetItem, ddbfault.OpBatchGetItem)
	return c
}

// freshLedgers makes both ledgers over a fresh source table, through a readCounter.
func freshLedgers(t *testing.T) map[string]func(t *testing.T) (Ledger, *readCounter, func(keys ...Key)) {
	return map[string]func(t *testing.T) (Ledger, *readCounter, func(keys ...Key)){
		"inline": func(t *testing.T) (Ledger, *readCounter, func(keys ...Key)) {
			db, source, names := lcSourceTable(t)
			rc := newReadCounter(db)
			l, err := NewInline(rc, source, names, lcOpts(t)...)
			require.NoError(t, err)
			return l, rc, lcSeeder(t, db, source)
		},
		"table": func(t *testing.T) (Ledger, *readCounter, func(keys ...Key)) {
			db, source, names := lcSourceTable(t)
			rc := newReadCounter(db)
			l, err := NewTable(rc, lcLedgerTable(t, db), "job-1", source, names, lcOpts(t)...)
			require.NoError(t, err)
			return l, rc, lcSeeder(t, db, source)
		},
	}
}

func freshReq(k Key, owner string, slot int, token int64) ClaimRequest {
	r := lcReq(k, owner, slot, token, lcT0)
	r.Fresh = true
	return r
}

// TestFreshClaims: a claim of an item the scan saw with no state (ClaimRequest.fresh) makes
// attempt 1 and, batched, reads nothing back; an item that has gained a state since is claimed
// under the general condition, so a due retry or an expired claim is still taken, and a live
// claim, a done item or the caller's own landed claim are reported as before.
func TestFreshClaims(t *testing.T) {
	ctx := context.Background()
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		for name, newLedger := range freshLedgers(t) {
			t.Run(name, func(t *testing.T) {
				l, rc, seed := newLedger(t)
				keys := lcKeys(0, 8)
				seed(keys...)

				// keys 0-2 untouched; 3 in a due retry (attempt 1); 4 claimed, expired;
				// 5 claimed, live by B; 6 done; 7 claimed by A already (a landed claim).
				c3 := lcMustClaim(t, l, lcReq(keys[3], "X", 1, 1, lcT0.Add(-2*lcTTL)), 1)
				require.NoError(t, l.Retry(ctx, c3, "boom", lcT0.Add(-lcTTL)))
				lcMustClaim(t, l, lcReq(keys[4], "X", 1, 1, lcT0.Add(-2*lcTTL)), 1)
				lcMustClaim(t, l, lcReq(keys[5], "B", 1, 1, lcT0), 1)
				c6 := lcMustClaim(t, l, lcReq(keys[6], "X", 1, 1, lcT0), 1)
				require.NoError(t, l.Complete(ctx, c6, lcT0))
				own := freshReq(keys[7], "A", 0, 1)
				own.ID = "own-claim" // sent again below, as the SDK resends a request whose answer was lost
				lcMustClaim(t, l, own, 1)

				// A batch of untouched items: attempt 1 each, no read.
				rc.reads.Store(0)
				reqs := []ClaimRequest{freshReq(keys[0], "A", 0, 1), freshReq(keys[1], "A", 0, 1), freshReq(keys[2], "A", 0, 1)}
				outs, err := l.Claim(ctx, reqs)
				require.NoError(t, err)
				require.Zero(t, rc.reads.Load(), "fresh claims that all landed read nothing back")
				for i, o := range outs {
					require.True(t, o.Claimed, "item %d", i)
					require.Equal(t, 1, o.Claim.Attempt, "item %d", i)
					require.Equal(t, 1, lcState(t, l, keys[i]).Attempts, "item %d: the stored attempt", i)
					require.NoError(t, l.Complete(ctx, o.Claim, lcT0), "item %d: the claim fences", i)
				}

				// Items that gained a state since the scan, batched and alone.
				moved := []ClaimRequest{freshReq(keys[3], "A", 0, 1), freshReq(keys[4], "A", 0, 1),
					freshReq(keys[5], "A", 0, 1), freshReq(keys[6], "A", 0, 1), own}
				check := func(outs []ClaimOutcome) {
					t.Helper()
					require.True(t, outs[0].Claimed, "a due retry is claimed under the general condition")
					require.Equal(t, 2, outs[0].Claim.Attempt)
					require.True(t, outs[1].Claimed, "an expired claim is taken over")
					require.Equal(t, 2, outs[1].Claim.Attempt)
					require.False(t, outs[2].Claimed)
					require.Equal(t, StatusClaimed, outs[2].Found.Status, "a live claim is not taken")
					require.False(t, outs[3].Claimed)
					require.Equal(t, StatusDone, outs[3].Found.Status)
					require.True(t, outs[4].Claimed, "the caller's own landed claim is the caller's")
					require.Equal(t, 1, outs[4].Claim.Attempt)
					for _, i := range []int{0, 1, 4} {
						require.NoError(t, l.Complete(ctx, outs[i].Claim, lcT0), "request %d: the claim fences", i)
					}
				}
				outs, err = l.Claim(ctx, moved)
				require.NoError(t, err)
				check(outs)
				require.True(t, moved[0].Fresh, "the caller's requests are left as they were")
			})
		}
	})
}

// TestFreshClaimsAlone: the same moved items claimed one request at a time (UpdateItem).
func TestFreshClaimsAlone(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		for name, newLedger := range freshLedgers(t) {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				l, _, seed := newLedger(t)
				keys := lcKeys(0, 4)
				seed(keys...)
				c0 := lcMustClaim(t, l, lcReq(keys[0], "X", 1, 1, lcT0.Add(-2*lcTTL)), 1)
				require.NoError(t, l.Retry(ctx, c0, "boom", lcT0.Add(-lcTTL)))
				lcMustClaim(t, l, lcReq(keys[1], "B", 1, 1, lcT0), 1)
				c2 := lcMustClaim(t, l, lcReq(keys[2], "X", 1, 1, lcT0), 1)
				require.NoError(t, l.Complete(ctx, c2, lcT0))

				o := lcClaim(t, l, freshReq(keys[0], "A", 0, 1))
				require.True(t, o.Claimed, "a due retry is claimed under the general condition")
				require.Equal(t, 2, o.Claim.Attempt)
				o = lcClaim(t, l, freshReq(keys[1], "A", 0, 1))
				require.False(t, o.Claimed)
				require.Equal(t, StatusClaimed, o.Found.Status)
				o = lcClaim(t, l, freshReq(keys[2], "A", 0, 1))
				require.False(t, o.Claimed)
				require.Equal(t, StatusDone, o.Found.Status)
				lcMustClaim(t, l, freshReq(keys[3], "A", 0, 1), 1)
			})
		}
	})
}

// TestFreshCompleteOnly: a complete-only write of an item the scan saw with no state completes
// it; one that has gained a state since (a retry) is refused, as a done or failed item is: the
// caller looks at it again, and a write that names the retry it saw (Seen) completes it.
func TestFreshCompleteOnly(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		for name, newLedger := range freshLedgers(t) {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				l, _, seed := newLedger(t)
				keys := lcKeys(0, 4)
				seed(keys...)
				c1 := lcMustClaim(t, l, lcReq(keys[1], "X", 1, 1, lcT0), 1)
				require.NoError(t, l.Retry(ctx, c1, "boom", lcT0))
				c2 := lcMustClaim(t, l, lcReq(keys[2], "X", 1, 1, lcT0), 1)
				require.NoError(t, l.Complete(ctx, c2, lcT0))
				c3 := lcMustClaim(t, l, lcReq(keys[3], "X", 1, 1, lcT0), 1)
				require.NoError(t, l.DeadLetter(ctx, c3, "bad", lcT0))

				for i, want := range []bool{true, false, false, false} {
					r := freshReq(keys[i], "A", 0, 1)
					done, err := lcCompleteOnly(ctx, l, r)
					require.NoError(t, err, "item %d", i)
					require.Equal(t, want, done, "item %d", i)
				}
				retry := lcState(t, l, keys[1])
				require.Equal(t, StatusRetry, retry.Status, "a fresh write is not made again under the general condition")
				r := lcReq(keys[1], "A", 0, 1, lcT0)
				r.Seen = retry.Claim
				done, err := lcCompleteOnly(ctx, l, r)
				require.NoError(t, err)
				require.True(t, done, "the retry it saw is completed")
				require.Equal(t, StatusDone, lcState(t, l, keys[0]).Status)
				require.Equal(t, StatusDone, lcState(t, l, keys[1]).Status)
				require.Equal(t, StatusDone, lcState(t, l, keys[2]).Status)
				require.Equal(t, StatusFailed, lcState(t, l, keys[3]).Status)
			})
		}
	})
}
