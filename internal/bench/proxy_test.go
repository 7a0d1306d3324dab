package bench

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

func TestUnion(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	iv := []interval{{at(50), at(60)}, {at(0), at(10)}, {at(5), at(20)}, {at(30), at(30)}, {at(55), at(58)}}
	total, spans := union(iv)
	require.Equal(t, 30*time.Millisecond, total) // 0–20 and 50–60
	require.Equal(t, 2, spans)
	total, spans = union(nil)
	require.Zero(t, total)
	require.Zero(t, spans)
}

// The proxy holds every request for its delay and records it.
func TestDelayProxy(t *testing.T) {
	ddbtest.Client(t) // fails with CI=true when DynamoDB Local is unreachable
	env := &Env{Endpoint: ddbtest.Endpoint(t)}
	pe, p, err := env.viaProxy(30 * time.Millisecond)
	require.NoError(t, err)
	defer p.close()
	start := time.Now()
	_, err = pe.DB.ListTables(context.Background(), &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	require.NoError(t, err)
	end := time.Now()
	require.GreaterOrEqual(t, end.Sub(start), 30*time.Millisecond)
	calls, busy, waits := p.busyBefore(start, end)
	require.Equal(t, 1, calls)
	require.Equal(t, 1, waits)
	require.GreaterOrEqual(t, busy, 30*time.Millisecond)
	require.LessOrEqual(t, busy, end.Sub(start))
}
