package worker

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ledger"
)

// TestCompleteOnlyRefusedByAResetItemLooksAgain (found by an adversarial review): a versioned
// complete-only once-job whose handler runs on X while another writer finishes X and X is then
// reset by hand (README: REMOVE dp_status, dp_done_at) or fails and is redriven. The job's write
// is refused (the item shows another claim id than the state the job saw), and the refusal reads
// as pending, which notNow took for a deleted item: the job ended with X pending. It now looks at
// X again, and X ends done.
func TestCompleteOnlyRefusedByAResetItemLooksAgain(t *testing.T) {
	for _, redrive := range []bool{false, true} {
		t.Run(map[bool]string{false: "reset", true: "redrive"}[redrive], func(t *testing.T) { testRefusedByReset(t, redrive) })
	}
}

func testRefusedByReset(t *testing.T, redrive bool) {
	ctx := context.Background()
	f := newFixture(t, 1)
	id := itemKey(0)
	l, err := ledger.NewInline(f.db, f.table, []string{"id"}, ledger.WithVersions())
	require.NoError(t, err)
	held, release := make(chan struct{}), make(chan struct{})
	runs := 0
	cfg := f.config(LedgerInline)
	cfg.Owner, cfg.Workers, cfg.Once, cfg.CompleteOnly, cfg.Versions = "B", 1, true, true, true
	cfg.LeaseTTL, cfg.Heartbeat, cfg.RetryBackoff, cfg.PollInterval = 3*time.Second, time.Second, 20*time.Millisecond, 200*time.Millisecond
	w, err := New(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx, func(_ context.Context, it Item) error {
			runs++
			if runs == 1 {
				close(held)
				<-release
			}
			return nil
		})
	}()
	waitOn(t, held, "B does not run X")
	// Another writer finishes X, then an operator resets it as the README says.
	if redrive {
		res, err := l.FailOnly(ctx, ledger.ClaimRequest{Key: skey(id), Owner: "other", Now: time.Now(), Until: time.Now()},
			ledger.Failure{Error: "x", Permanent: true, MaxAttempts: 3})
		require.NoError(t, err)
		require.True(t, res.Applied)
		moved, err := l.Redrive(ctx, skey(id), time.Now())
		require.NoError(t, err)
		require.True(t, moved)
	} else {
		res, err := l.CompleteOnly(ctx, ledger.ClaimRequest{Key: skey(id), Owner: "other", Now: time.Now(), Until: time.Now(), Fresh: true})
		require.NoError(t, err)
		require.True(t, res.Applied)
		_, err = f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.table), Key: skey(id),
			UpdateExpression: aws.String("REMOVE dp_status, dp_done_at")})
		require.NoError(t, err)
	}
	close(release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the once-job did not end")
	}
	st, err := l.State(ctx, skey(id))
	require.NoError(t, err)
	t.Logf("runs %d, X after the once-job: %+v", runs, st)
	require.Equal(t, StatusDone, st.Status, "the once-job ended with the reset item X not done (runs %d)", runs)
}
