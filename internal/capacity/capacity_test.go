package capacity

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAIMD: a throttle halves the rate, once per cooldown, not below Max/16; each whole second
// after the cut adds Max/10 back, up to Max.
func TestAIMD(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := NewAIMD(100)
	r, changed := a.Rate(t0)
	require.Equal(t, 100.0, r)
	require.False(t, changed)

	r, changed = a.Throttled(t0)
	require.True(t, changed)
	require.Equal(t, 50.0, r)
	r, changed = a.Throttled(t0.Add(AIMDCooldown / 2)) // the same burst of throttles
	require.False(t, changed)
	require.Equal(t, 50.0, r)
	for i := 1; i <= 6; i++ {
		r, _ = a.Throttled(t0.Add(time.Duration(i) * AIMDCooldown))
	}
	require.Equal(t, 100.0/16, r, "the floor")

	last := t0.Add(6 * AIMDCooldown)
	r, changed = a.Rate(last.Add(999 * time.Millisecond))
	require.False(t, changed)
	require.Equal(t, 100.0/16, r)
	r, changed = a.Rate(last.Add(2500 * time.Millisecond))
	require.True(t, changed)
	require.InDelta(t, 100.0/16+20, r, 1e-9)
	r, _ = a.Rate(last.Add(time.Minute))
	require.Equal(t, 100.0, r)
	require.Equal(t, 100.0, a.Current())
}

// TestBucketCreditAndDebt: an over-estimate is credited to the next request, an overrun delays
// the next one by its cost.
func TestBucketCreditAndDebt(t *testing.T) {
	ctx := context.Background()
	b := NewBucket(10, 1) // 10 units/s, burst 10
	taken, err := b.Wait(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 10, taken)
	b.Settle(taken, 4) // 6 credited
	began := time.Now()
	taken, err = b.Wait(ctx, 6) // paid by the credit: no wait
	require.NoError(t, err)
	require.Less(t, time.Since(began), 50*time.Millisecond)
	b.Settle(taken, 16) // 10 more than taken: debt
	// The bucket is now ~10 tokens in debt: one more unit waits about a second.
	ctx2, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = b.Wait(ctx2, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestBucketLargeRequestWaitsOneBurst: a request costing many seconds of the rate waits for its
// first second only (a commit of many writes at a low rate must be sent within its caller's
// timeout); the rest is debt that the next request waits for.
func TestBucketLargeRequestWaitsOneBurst(t *testing.T) {
	b := NewBucket(10, 1) // 10 units/s, burst 10
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	taken, err := b.Wait(ctx, 50) // 5 s of the rate; before, it waited for them all (4 s past the first)
	require.NoError(t, err)
	require.Equal(t, 50, taken)
	_, err = b.Wait(ctx, 1) // 40 units of debt ahead: about 4 s
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestBucketCancelledWaitGivesTokensBack: a large request whose wait ends before it is let
// through gives its tokens and its credit back (helper-72: of its reservations, cancelled first to
// last, x/time/rate gave back only the last one's, leaving the bucket charged for a write never
// sent: at 10/s a cancelled 30-unit wait left 2 s of debt).
func TestBucketCancelledWaitGivesTokensBack(t *testing.T) {
	b := NewBucket(10, 1) // 10 units/s, burst 10
	_, err := b.Wait(context.Background(), 10)
	require.NoError(t, err) // empty now
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = b.Wait(ctx, 30) // 3 bursts, cancelled while it waits for the first
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = b.Wait(ctx, 1) // about 0.1 s once the empty bucket refills; 2 s more with the debt kept
	require.NoError(t, err)
}

// TestBucketSetRate: a lower rate makes the next request wait longer.
func TestBucketSetRate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	b := NewBucket(1000, 1)
	_, err := b.Wait(ctx, 1000)
	require.NoError(t, err)
	b.SetRate(10) // the next 5 units now take half a second
	_, err = b.Wait(ctx, 5)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestIsThrottle(t *testing.T) {
	require.True(t, IsThrottle(fmt.Errorf("wrapped: %w", &types.ProvisionedThroughputExceededException{})))
	require.True(t, IsThrottle(&smithy.GenericAPIError{Code: "ThrottlingException"}))
	require.True(t, IsThrottle(&smithy.GenericAPIError{Code: "RequestLimitExceeded"}))
	require.False(t, IsThrottle(&types.ConditionalCheckFailedException{}))
	require.False(t, IsThrottle(nil))
	for _, c := range []string{"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"} {
		require.True(t, IsThrottleReason(c), c)
	}
	require.False(t, IsThrottleReason("ConditionalCheckFailed"))
	var n atomic.Int64
	require.NotNil(t, CountThrottles(&n))
}
