package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCompleteBatch: batched completions are fenced per claim like single ones: claims that are no
// longer current get ErrClaimLost, the others are done.
func TestCompleteBatch(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 30
			f := newFixture(t, n)
			led := f.ledger(t, kind, "")
			ctx := context.Background()
			now := time.Now()
			reqs := make([]ClaimRequest, n)
			for i := range reqs {
				reqs[i] = ClaimRequest{Key: skey(itemKey(i)), Owner: "a", Slot: 0, Token: 1, Now: now, Until: now.Add(time.Second)}
			}
			outs, err := led.Claim(ctx, reqs)
			require.NoError(t, err)
			claims := make([]Claim, n)
			for i, o := range outs {
				require.True(t, o.Claimed)
				claims[i] = o.Claim
			}
			// Items 3, 13 and 23 are reclaimed by b after a's claims expire.
			later := now.Add(2 * time.Second)
			for _, i := range []int{3, 13, 23} {
				o, err := led.Claim(ctx, []ClaimRequest{{Key: claims[i].Key, Owner: "b", Slot: 0, Token: 1, Now: later, Until: later.Add(time.Minute)}})
				require.NoError(t, err)
				require.True(t, o[0].Claimed)
			}
			errs := led.CompleteBatch(ctx, claims, later)
			require.Len(t, errs, n)
			for i, err := range errs {
				st, serr := led.State(ctx, claims[i].Key)
				require.NoError(t, serr)
				if i%10 == 3 {
					require.ErrorIs(t, err, ErrClaimLost, "item %d", i)
					require.Equal(t, StatusClaimed, st.Status)
					require.Equal(t, "b", st.Owner)
				} else {
					require.NoError(t, err, "item %d", i)
					require.Equal(t, StatusDone, st.Status)
					require.Equal(t, "a", st.Owner)
				}
			}
		})
	}
}
