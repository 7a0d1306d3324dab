package lock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/stretchr/testify/require"
)

// TestSlowRenewStillRenews: renewals that take longer than a heartbeat, but far less than the
// time left on the lease, keep the lease (each is given half the time to the local expiry), where
// cutting every attempt off after one heartbeat would let a working server's lease expire.
func TestSlowRenewStillRenews(t *testing.T) {
	db, table := lockTable(t)
	// Every UpdateItem is held for delay (real time) before it is sent: a server that answers
	// slower than a heartbeat, but well within the lease's TTL.
	var delay atomic.Int64 // nanoseconds; 0: no delay
	slow := ddbfault.New(db)
	slow.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if d := time.Duration(delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return send(ctx, call.In)
	}, ddbfault.OpUpdateItem)
	const heartbeat = 200 * time.Millisecond
	a, aev := newClient(t, slow, table, WithOwner("a"), WithLeaseTTL(3*time.Second), WithHeartbeat(heartbeat),
		WithMaxClockSkew(100*time.Millisecond), WithPollInterval(50*time.Millisecond))

	la, err := a.TryAcquireSlot(context.Background(), "g", 1)
	require.NoError(t, err)
	delay.Store(int64(2 * heartbeat))
	for i := range 4 {
		require.Equal(t, "ok", recv(t, aev.renewed, "a renew slower than a heartbeat"), "renew %d", i+1)
	}
	require.NoError(t, la.Context().Err(), "the lease is still held")
	require.Greater(t, la.renewTimeout(time.Now()), 2*heartbeat, "a renew gets more than the delay")
	delay.Store(0)
	release(t, la)
}
