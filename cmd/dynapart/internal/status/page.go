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
		doc, err := p.view(r.Context())
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
	serve          string
	interval       time.Duration
	ledgerInterval time.Duration
	ledger         cli.LedgerFlags
}

func (s *pageFlags) add(f *pflag.FlagSet) {
	f.StringVar(&s.serve, "serve", "", "serve a live status page (and /api/status) on this address, e.g. 127.0.0.1:8080, until interrupted")
	f.DurationVar(&s.interval, "interval", 2*time.Second,
		"--serve: how often the page's server reads the group (one Query of the lease table), whether or not anyone watches")
	f.DurationVar(&s.ledgerInterval, "ledger-interval", defaultLedgerEvery,
		"--serve: how often it reads the ledger's exact counts and dead letters (scans of the table); 0: never")
	f.StringVar(&s.ledger.Table, "table", "", "source table; read from the group (a different one is refused). With --json: add the ledger's counts and dead letters (one read)")
	f.StringVar(&s.ledger.Job, "job", "default", "job name; read from the group (a different one is refused)")
	f.StringVar(&s.ledger.Kind, "ledger", "inline", "ledger, inline or table; read from the group (a different one is refused)")
	f.StringVar(&s.ledger.LedgerTable, "ledger-table", worker.DefaultLedgerTable, "ledger table; read from the group (a different one is refused)")
	f.StringVar(&s.ledger.Prefix, "attr-prefix", worker.DefaultAttrPrefix, "inline ledger attribute prefix; read from the group (a different one is refused)")
}

// validate checks the flags before anything is read.
func (s *pageFlags) validate() error {
	if s.interval <= 0 {
		return cli.Usagef("--interval must be positive, got %s", s.interval)
	}
	if s.ledgerInterval < 0 {
		return cli.Usagef("--ledger-interval must be 0 (never) or positive, got %s", s.ledgerInterval)
	}
	return nil
}

// readsLedger says whether the document has the ledger's counts: the page's unless
// --ledger-interval is 0; --json's only with --table (a scan per call).
func (s *pageFlags) readsLedger() bool {
	if s.serve == "" {
		return s.ledger.Table != ""
	}
	return s.ledgerInterval > 0
}

// run prints the status document once (--json) or serves the live page (--serve).
func (s *pageFlags) run(cmd *cobra.Command, g *cli.Globals, group, leaseTable string) error {
	if err := s.validate(); err != nil {
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
	page, err := s.newPage(cmd, g, group, leaseTable)
	if err != nil {
		return err
	}
	if s.serve == "" {
		doc, err := page.once(ctx)
		if err != nil {
			return err
		}
		return printJSONIndent(cmd.OutOrStdout(), doc)
	}
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		page.Run(sctx)
	}()
	err = servePage(sctx, page, l, cmd.OutOrStdout())
	stop()
	<-sampled
	return err
}

// newPage makes the page of group, its reads metered, after checking the ledger flags given
// against the group's meta item (exit 2 when they disagree).
func (s *pageFlags) newPage(cmd *cobra.Command, g *cli.Globals, group, leaseTable string) (*Page, error) {
	ctx := cmd.Context()
	lc, db, err := g.LeaseClientAndDB(ctx, leaseTable)
	if err != nil {
		return nil, err
	}
	st, err := lc.GroupStatus(ctx, group)
	if err != nil {
		return nil, err
	}
	if s.serve == "" && !groupExists(st) { // the page waits for a group about to start
		return nil, cli.GroupNotFound(group, leaseTable)
	}
	if err := checkLedgerFlags(cmd.Flags(), s.ledger, st.Meta); err != nil {
		return nil, err
	}
	lease := &readMeter{}
	locks, err := lock.New(meteredLeaseDB{db, lease}, leaseTable)
	if err != nil {
		return nil, err
	}
	streams, err := g.StreamsClient(ctx)
	if err != nil {
		return nil, err
	}
	rd := &reader{locks: locks, group: group, tables: db}
	page := newPage(rd, s.interval, realClock())
	page.lease, page.streams = lease, rd.watchStream(streams)
	if s.readsLedger() {
		page.ledger = newLedgerCache(s.ledgerInterval, page.clock, func(ctx context.Context, meta map[string]string, m *readMeter) (worker.Ledger, cli.LedgerFlags, error) {
			lf, ok := s.ledgerOf(meta)
			if !ok {
				return nil, lf, nil
			}
			led, err := lf.OpenVia(ctx, g, func(db worker.LedgerClient) worker.LedgerClient { return meteredLedgerDB{db, m} })
			return led, lf, err
		})
	}
	return page, nil
}

// ledgerOf is the group's ledger as its meta records it, else (a group that has not run yet)
// the flags' when --table was given.
func (s *pageFlags) ledgerOf(meta map[string]string) (cli.LedgerFlags, bool) {
	if lf, _, ok := cli.RecordedLedger(meta); ok {
		return lf, true
	}
	return s.ledger, s.ledger.Table != ""
}

// newLedgerCache reads the ledger opened by open every every (at most), metered.
func newLedgerCache(every time.Duration, clock pageClock, open func(context.Context, map[string]string, *readMeter) (worker.Ledger, cli.LedgerFlags, error)) *ledgerCache {
	m := &readMeter{}
	return &ledgerCache{every: every, maxDead: maxDeadLetters, meter: m, now: clock.now,
		open: func(ctx context.Context, meta map[string]string) (worker.Ledger, cli.LedgerFlags, error) {
			return open(ctx, meta, m)
		}}
}

// workerPageEvery is how often a worker's page samples the group while someone watches it.
const workerPageEvery = 5 * time.Second

// WorkerPage is the status page a worker serves next to /metrics: its group, its own stats, and
// the ledger's counts and dead letters. Its Run samples the group only while someone has looked
// in the last 10 minutes, and reads the ledger at most every 5 minutes, only if someone looked
// since the last read: a worker's page costs nothing while nobody watches.
func WorkerPage(g *cli.Globals, lf cli.LedgerFlags, w *worker.Worker) (*Page, error) {
	cfg := w.Config()
	lease := &readMeter{}
	lc, err := lock.New(meteredLeaseDB{cfg.Client, lease}, cfg.LeaseTable)
	if err != nil {
		return nil, err
	}
	rd := &reader{locks: lc, group: cfg.Group, tables: cfg.Client}
	p := newPage(rd, workerPageEvery, realClock())
	p.always, p.lease, p.stats, p.owner = false, lease, w.Stats, cfg.Owner
	if cfg.Streams != nil { // a worker that follows the stream (as every worker of its group does)
		p.streams = rd.watchStream(cfg.Streams)
	}
	p.ledger = newLedgerCache(defaultLedgerEvery, p.clock, func(ctx context.Context, _ map[string]string, m *readMeter) (worker.Ledger, cli.LedgerFlags, error) {
		led, err := lf.OpenVia(ctx, g, func(db worker.LedgerClient) worker.LedgerClient { return meteredLedgerDB{db, m} })
		return led, lf, err
	})
	p.ledger.onView = true
	return p, nil
}
