package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"sync"
	"time"
)

// The live status page: web/ holds the page (plain HTML, CSS and JS, embedded in the binary, no
// CDN); statusPage serves it with /api/status, the statusDoc the page polls.

//go:embed web
var webFiles embed.FS

const (
	// statusSamples is how many throughput samples the page keeps (at the default interval, 10 min).
	statusSamples = 300
	// statusRateWindow is the span the rate and ETA are measured over.
	statusRateWindow = 30 * time.Second
	// statusMaxDeadLetters bounds the dead letters listed on the page (all are counted).
	statusMaxDeadLetters = 50
)

// statusPage serves the page and its JSON. A read happens at most once per every, however many
// viewers poll (with a ledger, each read scans the table); every read adds a throughput sample.
type statusPage struct {
	reader *statusReader
	every  time.Duration
	now    func() time.Time

	mu      sync.Mutex
	last    *statusDoc
	lastAt  time.Time
	samples []sample
}

func newStatusPage(r *statusReader, every time.Duration) *statusPage {
	return &statusPage{reader: r, every: every, now: time.Now}
}

// current returns the latest document, reading a new one when the last is older than every.
func (p *statusPage) current(ctx context.Context) (*statusDoc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.last != nil && now.Sub(p.lastAt) < p.every {
		return p.last, nil
	}
	doc, err := p.reader.read(ctx, now)
	if err != nil {
		return nil, err
	}
	p.addSample(doc, now)
	p.last, p.lastAt = doc, now
	return doc, nil
}

// addSample records the done count and fills in doc's throughput.
func (p *statusPage) addSample(doc *statusDoc, now time.Time) {
	done, ok := doc.doneCount()
	if !ok {
		return
	}
	s := sample{T: now.UnixMilli(), Done: done}
	if n := len(p.samples); n > 0 {
		prev := p.samples[n-1]
		if dt := float64(s.T-prev.T) / 1000; dt > 0 {
			s.Rate = max(0, float64(s.Done-prev.Done)/dt)
		}
	}
	p.samples = append(p.samples, s)
	if len(p.samples) > statusSamples {
		p.samples = p.samples[len(p.samples)-statusSamples:]
	}
	doc.Throughput = throughputOf(p.samples, doc)
}

// throughputOf measures the rate over the samples of the last statusRateWindow and the ETA.
func throughputOf(samples []sample, doc *statusDoc) throughput {
	last := samples[len(samples)-1]
	first := last
	for i := len(samples) - 1; i >= 0 && last.T-samples[i].T <= statusRateWindow.Milliseconds(); i-- {
		first = samples[i]
	}
	tp := throughput{Done: &last.Done, Samples: append([]sample(nil), samples...)}
	if dt := float64(last.T-first.T) / 1000; dt > 0 {
		tp.Rate = max(0, float64(last.Done-first.Done)/dt)
		tp.RateWindow = dt
	}
	if left, ok := doc.remaining(); ok {
		switch {
		case left <= 0:
			zero := 0.0
			tp.ETASeconds = &zero
		case tp.Rate > 0:
			eta := float64(left) / tp.Rate
			tp.ETASeconds = &eta
		}
	} else if doc.Progress != nil {
		tp.ETASeconds = doc.Progress.ETASeconds // without the ledger: the slots' estimate
	}
	return tp
}

// mount adds the page (/ and /assets/) and /api/status to mux.
func (p *statusPage) mount(mux *http.ServeMux) {
	assets, _ := fs.Sub(webFiles, "web") // cannot fail: web is embedded
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		f, err := assets.Open("index.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.Copy(w, f)
	})
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		doc, err := p.current(r.Context())
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
}

// listenStatus opens the --serve address, before anything is read (a bad address is bad usage).
func listenStatus(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usagef("--serve %q: %v", addr, err)
	}
	return l, nil
}

// serveStatusPage serves the page on l until ctx ends, after printing its URL to out; it closes l.
func serveStatusPage(ctx context.Context, p *statusPage, l net.Listener, out io.Writer) error {
	mux := http.NewServeMux()
	p.mount(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(out, "dynapart: status page on http://%s/ (JSON: /api/status)\n", l.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
