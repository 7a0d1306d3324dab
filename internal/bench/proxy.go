package bench

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"time"
)

// delayProxy is a loopback HTTP reverse proxy in front of DynamoDB that holds every request for a
// fixed delay before forwarding it: a stand-in for the round trip to DynamoDB in a region (the
// server's own time is still DynamoDB Local's). It also records when each request began and ended
// as seen by the client, so a scenario can tell its own time from the time spent waiting on
// DynamoDB.
type delayProxy struct {
	delay time.Duration
	srv   *http.Server
	ln    net.Listener
	// upstream carries the proxy's requests to DynamoDB; client carries a scenario's requests to
	// the proxy. Both are closed with the proxy (no idle connection outlives it).
	upstream, client *http.Transport

	mu    sync.Mutex
	calls []interval
}

type interval struct{ from, to time.Time }

// startProxy listens on 127.0.0.1 (a free port) and forwards to target after delay.
func startProxy(target string, delay time.Duration) (*delayProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{delay: delay, ln: ln,
		upstream: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
		client:   &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = p.upstream
	rp.ErrorLog = nil
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from := time.Now()
		if p.delay > 0 {
			t := time.NewTimer(p.delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		rp.ServeHTTP(w, r)
		p.mu.Lock()
		p.calls = append(p.calls, interval{from, time.Now()})
		p.mu.Unlock()
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's endpoint.
func (p *delayProxy) URL() string { return "http://" + p.ln.Addr().String() }

// reset forgets the recorded calls.
func (p *delayProxy) reset() {
	p.mu.Lock()
	p.calls = nil
	p.mu.Unlock()
}

// busyBefore is how many calls began before end; how long, in wall time between start and end,
// at least one call was in flight (the union of the calls' intervals): the time a client spent
// waiting on DynamoDB, counted once when calls overlap; and in how many separate waits (the
// union's spans: calls sent together count once, calls sent one after another each count), the
// round trips that a region's latency multiplies.
func (p *delayProxy) busyBefore(start, end time.Time) (calls int, busy time.Duration, waits int) {
	p.mu.Lock()
	iv := append([]interval(nil), p.calls...)
	p.mu.Unlock()
	var kept []interval
	for _, c := range iv {
		if c.from.Before(end) {
			calls++
			kept = append(kept, interval{maxTime(c.from, start), minTime(c.to, end)})
		}
	}
	busy, waits = union(kept)
	return calls, busy, waits
}

// union is the total length of the intervals' union and its number of spans (empty intervals
// ignored).
func union(iv []interval) (total time.Duration, spans int) {
	slices.SortFunc(iv, func(a, b interval) int { return a.from.Compare(b.from) })
	var cur interval
	open := false
	for _, c := range iv {
		switch {
		case !c.to.After(c.from):
		case !open:
			cur, open = c, true
		case c.from.After(cur.to):
			total += cur.to.Sub(cur.from)
			spans++
			cur = c
		case c.to.After(cur.to):
			cur.to = c.to
		}
	}
	if open {
		total += cur.to.Sub(cur.from)
		spans++
	}
	return total, spans
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (p *delayProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.client.CloseIdleConnections()
	if err := p.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = p.srv.Close()
	}
	p.upstream.CloseIdleConnections()
}

// viaProxy returns a copy of e whose client and endpoint go through a proxy adding delay to every
// request; close the proxy when done.
func (e *Env) viaProxy(delay time.Duration) (*Env, *delayProxy, error) {
	p, err := startProxy(e.Endpoint, delay)
	if err != nil {
		return nil, nil, err
	}
	pe := *e
	pe.Endpoint = p.URL()
	pe.DB = NewClient(pe.Endpoint, &http.Client{Transport: p.client})
	return &pe, p, nil
}
