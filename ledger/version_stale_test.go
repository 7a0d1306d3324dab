package ledger

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStaleCompleteOnlyAfterReopenAndRedrive (found by an adversarial review of the fence on the
// state seen): B prepared a complete-only write of v1 when it saw no state. A finished v1, the
// item changed (Renew: retry for v2), v2 was dead-lettered, and an operator redrove it, which
// leaves no state. B's v1 write used to land then (v1 done a second time, its effects committed
// again, the item recorded at v1 while its content is v2): a versioned ledger's redrive now
// writes a new claim id, which B's write, fenced on the state it saw (none), does not find.
func TestStaleCompleteOnlyAfterReopenAndRedrive(t *testing.T) {
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			l, db, source := versionedLedger(t, kind, "job-v")
			k := lcKey(0)
			lcSeeder(t, db, source)(k)

			// A finishes v1 (saw no state).
			a := lcReq(k, "A", 0, 1, lcT0)
			a.Fresh, a.Version = true, "v1"
			res, err := l.CompleteOnly(ctx, a)
			require.NoError(t, err)
			require.True(t, res.Applied)
			done := lcState(t, l, k)
			// v2: reopened.
			id, err := l.Renew(ctx, k, done.Claim, lcT0)
			require.NoError(t, err)
			require.NotEmpty(t, id)
			// v2 fails for good; redriven.
			f := lcReq(k, "A", 0, 1, lcT0)
			f.Seen, f.Version = id, "v2"
			res, err = l.FailOnly(ctx, f, Failure{Error: "boom", RetryAt: lcT0, Permanent: true, MaxAttempts: 3})
			require.NoError(t, err)
			require.True(t, res.Applied)
			moved, err := l.Redrive(ctx, k, lcT0)
			require.NoError(t, err)
			require.True(t, moved)

			// B's v1 write, prepared when it saw no state.
			b := lcReq(k, "B", 1, 1, lcT0)
			b.Fresh, b.Version = true, "v1"
			res, err = l.CompleteOnly(ctx, b)
			require.NoError(t, err)
			st := lcState(t, l, k)
			require.False(t, res.Applied, "B's write of v1, a version finished (and reopened) since, lands again: %+v", st)
			require.Equal(t, StatusPending, st.Status, "still redriven: %+v", st)
			require.Equal(t, StatusPending, res.Found.Status)

			// A worker that judges the redriven item by what it reads now completes it.
			c := lcReq(k, "C", 1, 1, lcT0)
			c.Fresh, c.Seen, c.Version = true, st.Claim, "v2"
			res, err = l.CompleteOnly(ctx, c)
			require.NoError(t, err)
			require.True(t, res.Applied)
		})
	}
}
