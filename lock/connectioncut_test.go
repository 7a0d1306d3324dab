package lock

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

// cutProxy forwards TCP to DynamoDB Local until Cut, after which it swallows every byte in both
// directions while keeping connections open: a network black hole, the case where a client hangs
// unless it has timeouts.
type cutProxy struct {
	ln     net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *cutProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A connection cut in the middle of a lease ends in a cancelled lease context (no hang), and the
// standby that takes over does so only after the cut-off holder's context has ended.
func TestConnectionCutCancelsLease(t *testing.T) {
	direct, table := lockTable(t)
	u, err := url.Parse(ddbtest.Endpoint(t))
	require.NoError(t, err)
	proxy := newCutProxy(t, u.Host)

	tr := &http.Transport{MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: 300 * time.Millisecond}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := ddbtest.Config(t)
	cfg.BaseEndpoint = aws.String("http://" + proxy.addr())
	cfg.HTTPClient = &http.Client{Transport: tr, Timeout: 400 * time.Millisecond}
	viaProxy := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })

	opts := []Option{WithLeaseTTL(1500 * time.Millisecond), WithHeartbeat(300 * time.Millisecond),
		WithMaxClockSkew(100 * time.Millisecond), WithPollInterval(50 * time.Millisecond)}
	a, aev := newClient(t, viaProxy, table, append(opts, WithOwner("a"))...)
	b, _ := newClient(t, direct, table, append(opts, WithOwner("b"))...)

	ctx := context.Background()
	la, err := a.AcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	require.Equal(t, "ok", recv(t, aev.renewed, "a renew through the proxy"))

	bctx, cancelB := context.WithTimeout(ctx, failsafe)
	defer cancelB()
	res := standby(bctx, b, "g", 1)
	proxy.cut.Store(true)
	cutAt := time.Now()

	waitDone(t, la, "a's lease context after the cut")
	require.ErrorIs(t, la.Err(), ErrLeaseLost)
	require.Less(t, time.Since(cutAt), 1500*time.Millisecond+time.Second, "ended by the local expiry, not a hang")

	got := recv(t, res, "b takes over")
	require.NoError(t, got.err)
	lb := got.lease
	require.True(t, la.endedAt.Before(lb.AcquiredAt()), "no double holder: a ended %s before b acquired", lb.AcquiredAt().Sub(la.endedAt))
	require.True(t, lb.AcquiredAt().After(la.ExpiresAt().Add(100*time.Millisecond)))
	require.True(t, lb.TookOver())

	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	err = la.Release(rctx)
	require.Error(t, err, "the release write cannot get through")
	require.Less(t, time.Since(start), 2*time.Second)
	var te *TableError
	require.False(t, errors.As(err, &te))
	require.NoError(t, lb.Err())
	release(t, lb)
}
