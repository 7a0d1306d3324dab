package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// barrier holds its callers until want of them wait, then lets that group go together.
type barrier struct {
	mu   sync.Mutex
	n    int
	want int
	open chan struct{}
}

func (b *barrier) wait() {
	b.mu.Lock()
	ch := b.open
	if b.n++; b.n == b.want {
		close(ch)
		b.n, b.open = 0, make(chan struct{})
	}
	b.mu.Unlock()
	<-ch
}

// The CLI's DynamoDB client keeps its connections between rounds of many requests in flight: 3
// rounds of 32 concurrent calls open 32 connections, not 32 and then 22 more per round (the
// SDK's own client keeps 10 idle).
func TestDynamoClientKeepsItsConnections(t *testing.T) {
	const inFlight, rounds = 32, 3
	b := &barrier{want: inFlight, open: make(chan struct{})}
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b.wait()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte("{}"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	g := &Globals{Endpoint: srv.URL, IO: Stdio{LookupEnv: func(string) (string, bool) { return "", false }}}
	db, err := g.DynamoClient(context.Background())
	require.NoError(t, err)
	for range rounds {
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
					Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "1"}}})
				require.NoError(t, err)
			})
		}
		wg.Wait()
	}
	require.EqualValues(t, inFlight, opened.Load(), "connections opened for %d rounds of %d calls", rounds, inFlight)
}
