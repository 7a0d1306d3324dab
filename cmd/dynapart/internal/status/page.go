package status

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
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// The live status page: web/ holds the page (plain HTML, CSS and JS, embedded in the binary, no
// CDN); Page serves it with /api/status, the Document the page polls.

//go:embed web
var webFiles embed.FS

const (
	// pageSamples is how many throughput samples the page keeps (at the default interval, 10 min).
	pageSamples = 300
	// rateWindow is the span the rate and ETA are measured over.
	rateWindow = 30 * time.Second
	// maxDeadLetters bounds the dead letters listed on the page (all are counted).
	maxDeadLetters = 50
)

// Page serves the page and its JSON. A read happens at most once per every, however many
// viewers poll (with a ledger, each read scans the table); every read adds a throughput sample.
type Page struct {
	reader *reader
	every  time.Duration
	now    func() time.Time

	mu      sync.Mutex
	last    *Document
	lastAt  time.Time
	samples []sample
}

func newPage(r *reader, every time.Duration) *Page {
	return &Page{reader: r, every: every, now: time.Now}
}

// current returns the latest document, reading a new one when the last is older than every.
func (p *Page) current(ctx context.Context) (*Document, error) {
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
func (p *Page) addSample(doc *Document, now time.Time) {
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
	if len(p.samples) > pageSamples {
		p.samples = p.samples[len(p.samples)-pageSamples:]
	}
	doc.Throughput = throughputOf(p.samples, doc)
}

// throughputOf measures the rate over the samples of the last statusRateWindow and the ETA.
func throughputOf(samples []sample, doc *Document) throughput {
	last := samples[len(samples)-1]
	first := last
	for i := len(samples) - 1; i >= 0 && last.T-samples[i].T <= rateWindow.Milliseconds(); i-- {
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

// Mount adds the page (/ and /assets/) and /api/status to mux.
func (p *Page) Mount(mux *http.ServeMux) {
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

// listen opens the --serve address, before anything is read (a bad address is bad usage).
func listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, cli.Usagef("--serve %q: %v", addr, err)
	}
	return l, nil
}

// servePage serves the page on l until ctx ends, after printing its URL to out; it closes l.
func servePage(ctx context.Context, p *Page, l net.Listener, out io.Writer) error {
	mux := http.NewServeMux()
	p.Mount(mux)
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

// pageFlags are the status command's flags for the JSON document and the live page.
type pageFlags struct {
	serve    string
	interval time.Duration
	ledger   cli.LedgerFlags
}

func (s *pageFlags) add(f *pflag.FlagSet) {
	f.StringVar(&s.serve, "serve", "", "serve a live status page (and /api/status) on this address, e.g. 127.0.0.1:8080, until interrupted")
	f.DurationVar(&s.interval, "interval", 2*time.Second, "--serve: the least time between two reads of the group (and, with --table, of the ledger)")
	f.StringVar(&s.ledger.Table, "table", "", "source table: adds item counts, ETA and dead letters (read from the ledger; each read scans the table)")
	f.StringVar(&s.ledger.Job, "job", "default", "with --table: job name (table ledger)")
	f.StringVar(&s.ledger.Kind, "ledger", "inline", "with --table: ledger, inline or table")
	f.StringVar(&s.ledger.LedgerTable, "ledger-table", worker.DefaultLedgerTable, "with --table: ledger table, for --ledger table")
	f.StringVar(&s.ledger.Prefix, "attr-prefix", worker.DefaultAttrPrefix, "with --table: inline ledger attribute prefix")
}

// validate checks the flags before anything is read.
func (s *pageFlags) validate(cmd *cobra.Command) error {
	if s.interval <= 0 {
		return cli.Usagef("--interval must be positive, got %s", s.interval)
	}
	if s.ledger.Table == "" {
		for _, name := range []string{"job", "ledger", "ledger-table", "attr-prefix"} {
			if cmd.Flags().Changed(name) {
				return cli.Usagef("--%s needs --table", name)
			}
		}
	}
	return nil
}

// run prints the status document once (--json) or serves the live page (--serve).
func (s *pageFlags) run(cmd *cobra.Command, g *cli.Globals, group, leaseTable string) error {
	if err := s.validate(cmd); err != nil {
		return err
	}
	var l net.Listener
	if s.serve != "" {
		var err error
		if l, err = listen(s.serve); err != nil {
			return err
		}
		defer l.Close()
	}
	ctx := cmd.Context()
	lc, db, err := g.LeaseClientAndDB(ctx, leaseTable)
	if err != nil {
		return err
	}
	r := &reader{locks: lc, group: group, maxDead: maxDeadLetters, tables: db}
	if s.ledger.Table != "" {
		if r.ledger, err = s.ledger.Open(ctx, g); err != nil {
			return err
		}
	}
	page := newPage(r, s.interval)
	if s.serve == "" {
		doc, err := page.current(ctx)
		if err != nil {
			return err
		}
		return printJSONIndent(cmd.OutOrStdout(), doc)
	}
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return servePage(sctx, page, l, cmd.OutOrStdout())
}

// workerPageEvery is the least time between two reads of the worker's status page.
const workerPageEvery = 5 * time.Second

// WorkerPage is the status page a worker serves next to /metrics: its group, its own stats,
// and the ledger's counts and dead letters. It makes no DynamoDB call until the page is read.
func WorkerPage(g *cli.Globals, lf cli.LedgerFlags, w *worker.Worker) (*Page, error) {
	cfg := w.Config()
	lc, err := lock.New(cfg.Client, cfg.LeaseTable)
	if err != nil {
		return nil, err
	}
	r := &reader{locks: lc, group: cfg.Group, stats: w.Stats, owner: cfg.Owner, maxDead: maxDeadLetters, tables: cfg.Client,
		openLedger: func(ctx context.Context) (worker.Ledger, error) { return lf.Open(ctx, g) }}
	return newPage(r, workerPageEvery), nil
}
