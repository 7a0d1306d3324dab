package main

import (
	"context"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// statusLiveFlags are the status command's flags for the JSON document and the live page.
type statusLiveFlags struct {
	serve    string
	interval time.Duration
	ledger   ledgerFlags
}

func (s *statusLiveFlags) add(f *pflag.FlagSet) {
	f.StringVar(&s.serve, "serve", "", "serve a live status page (and /api/status) on this address, e.g. 127.0.0.1:8080, until interrupted")
	f.DurationVar(&s.interval, "interval", 2*time.Second, "--serve: the least time between two reads of the group (and, with --table, of the ledger)")
	f.StringVar(&s.ledger.table, "table", "", "source table: adds item counts, ETA and dead letters (read from the ledger; each read scans the table)")
	f.StringVar(&s.ledger.job, "job", "default", "with --table: job name (table ledger)")
	f.StringVar(&s.ledger.kind, "ledger", "inline", "with --table: ledger, inline or table")
	f.StringVar(&s.ledger.ledgerTable, "ledger-table", worker.DefaultLedgerTable, "with --table: ledger table, for --ledger table")
	f.StringVar(&s.ledger.prefix, "attr-prefix", worker.DefaultAttrPrefix, "with --table: inline ledger attribute prefix")
}

// validate checks the flags before anything is read.
func (s *statusLiveFlags) validate(cmd *cobra.Command) error {
	if s.interval <= 0 {
		return usagef("--interval must be positive, got %s", s.interval)
	}
	if s.ledger.table == "" {
		for _, name := range []string{"job", "ledger", "ledger-table", "attr-prefix"} {
			if cmd.Flags().Changed(name) {
				return usagef("--%s needs --table", name)
			}
		}
	}
	return nil
}

// run prints the status document once (--json) or serves the live page (--serve).
func (s *statusLiveFlags) run(cmd *cobra.Command, g *globals, group, leaseTable string) error {
	if err := s.validate(cmd); err != nil {
		return err
	}
	var l net.Listener
	if s.serve != "" {
		var err error
		if l, err = listenStatus(s.serve); err != nil {
			return err
		}
		defer l.Close()
	}
	ctx := cmd.Context()
	lc, db, err := g.leaseClientAndDB(ctx, leaseTable)
	if err != nil {
		return err
	}
	r := &statusReader{locks: lc, group: group, maxDead: statusMaxDeadLetters, tables: db}
	if s.ledger.table != "" {
		if r.ledger, err = s.ledger.open(ctx, g); err != nil {
			return err
		}
	}
	page := newStatusPage(r, s.interval)
	if s.serve == "" {
		doc, err := page.current(ctx)
		if err != nil {
			return err
		}
		return printJSONIndent(cmd.OutOrStdout(), doc)
	}
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serveStatusPage(sctx, page, l, cmd.OutOrStdout())
}

// workerStatusEvery is the least time between two reads of the worker's status page.
const workerStatusEvery = 5 * time.Second

// workerStatusPage is the status page a worker serves next to /metrics: its group, its own stats,
// and the ledger's counts and dead letters. It makes no DynamoDB call until the page is read.
func workerStatusPage(g *globals, lf ledgerFlags, w *worker.Worker) (*statusPage, error) {
	cfg := w.Config()
	lc, err := lock.New(cfg.Client, cfg.LeaseTable)
	if err != nil {
		return nil, err
	}
	r := &statusReader{locks: lc, group: cfg.Group, stats: w.Stats, owner: cfg.Owner, maxDead: statusMaxDeadLetters, tables: cfg.Client,
		openLedger: func(ctx context.Context) (worker.Ledger, error) { return lf.open(ctx, g) }}
	return newStatusPage(r, workerStatusEvery), nil
}
