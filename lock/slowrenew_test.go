package lock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
)

// slowUpdates holds every UpdateItem for delay (real time) before sending it: a server that
// answers slower than a heartbeat, but well within the lease's TTL.
type slowUpdates struct {
	DynamoDBClient
	delay atomic.Int64 // nanoseconds; 0: no delay
}

func (s *slowUpdates) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d := time.Duration(s.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.DynamoDBClient.UpdateItem(ctx, in, o...)
}

// TestSlowRenewStillRenews: renewals that take longer than a heartbeat, but far less than the
// time left on the lease, keep the lease (each is given half the time to the local expiry), where
// cutting every attempt off after one heartbeat would let a working server's lease expire.
func TestSlowRenewStillRenews(t *testing.T) {
	db, table := lockTable(t)
	slow := &slowUpdates{DynamoDBClient: db}
	const heartbeat = 200 * time.Millisecond
	a, aev := newClient(t, slow, table, WithOwner("a"), WithLeaseTTL(3*time.Second), WithHeartbeat(heartbeat),
		WithMaxClockSkew(100*time.Millisecond), WithPollInterval(50*time.Millisecond))

	la, err := a.TryAcquireSlot(context.Background(), "g", 1)
	require.NoError(t, err)
	slow.delay.Store(int64(2 * heartbeat))
	for i := range 4 {
		require.Equal(t, "ok", recv(t, aev.renewed, "a renew slower than a heartbeat"), "renew %d", i+1)
	}
	require.NoError(t, la.Context().Err(), "the lease is still held")
	require.Greater(t, la.renewTimeout(time.Now()), 2*heartbeat, "a renew gets more than the delay")
	slow.delay.Store(0)
	release(t, la)
}
