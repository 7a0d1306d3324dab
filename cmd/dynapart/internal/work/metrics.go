package work

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/worker"
)

// metrics exposes a worker's counters to Prometheus. The names follow Prometheus conventions
// (counters end in _total and carry their unit; README "Metrics" lists them).
type metrics struct {
	reg      *prometheus.Registry
	items    *prometheus.CounterVec
	latency  prometheus.Histogram
	leases   *prometheus.CounterVec
	takeover prometheus.Counter
	// mount, when set, adds more handlers next to /metrics (the status page).
	mount func(*http.ServeMux)
}

func newMetrics(w func() worker.Stats) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dynapart_items_total",
			Help: "Items by outcome: claimed (a claim won, before the handler), completed, retried, dead_lettered, released, claim_lost, skipped, unknown (an outcome write got no answer), abandoned, unprocessable."}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dynapart_handler_seconds",
			Help: "Handler latency.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dynapart_lease_events_total",
			Help: "Lease events: acquired, lost, released, finished."}, []string{"event"}),
		takeover: prometheus.NewCounter(prometheus.CounterOpts{Name: "dynapart_takeovers_total",
			Help: "Slots taken over from a holder that had not released (crashed or frozen)."}),
	}
	gauge := func(name, help string, f func(worker.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(w()) })
	}
	// Totals that only grow are counters: their names end in _total and carry the unit.
	counter := func(name, help string, f func(worker.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(w()) })
	}
	m.reg.MustRegister(m.items, m.latency, m.leases, m.takeover,
		counter("dynapart_consumed_read_capacity_units_total", "Read capacity units consumed by this worker's scans and its consistent reads of items (a follower's, a --versions worker's after a claim or a table ledger row).", func(s worker.Stats) float64 { return s.RCU }),
		counter("dynapart_consumed_write_capacity_units_total", "Write capacity units consumed by this worker's ledger writes, by DynamoDB's billing rules (at least 1 per write, 2 per item of a transaction; larger items as DynamoDB reports them, asked of every write with --write-rate, otherwise of 1 in 16).", func(s worker.Stats) float64 { return s.WCU }),
		counter("dynapart_write_throttles_total", "Ledger write attempts DynamoDB throttled (ProvisionedThroughputExceeded, ThrottlingException, RequestLimitExceeded; SDK retries included).", func(s worker.Stats) float64 { return float64(s.WriteThrottles) }),
		gauge("dynapart_write_rate_allowed", "WCU per second --write-rate allows now (lower for a while after throttling); 0 when unlimited.", func(s worker.Stats) float64 { return s.WriteRateAllowed }),
		counter("dynapart_scanned_items_total", "Items read from the slot's share.", func(s worker.Stats) float64 { return float64(s.Scanned) }),
		gauge("dynapart_slot", "The slot held now, -1 when none (standby).", func(s worker.Stats) float64 { return float64(s.Slot) }),
		gauge("dynapart_paused", "1 while the group is paused (dynapart pause) and this worker claims nothing; its slot is kept.", func(s worker.Stats) float64 {
			if s.Paused {
				return 1
			}
			return 0
		}),
		gauge("dynapart_lease_held", "1 while this worker holds a slot lease.", func(s worker.Stats) float64 {
			if s.State == worker.StateWorking {
				return 1
			}
			return 0
		}),
	)
	m.reg.MustRegister(followCollectors(counter, gauge)...)
	return m
}

// statFunc makes a collector of a worker stat.
type statFunc func(name, help string, f func(worker.Stats) float64) prometheus.Collector

// followCollectors are the metrics of following the table's stream (work --follow, Stats.Follow):
// 0 for a worker that does not follow it.
func followCollectors(counter, gauge statFunc) []prometheus.Collector {
	of := func(f func(*worker.FollowStats) float64) func(worker.Stats) float64 {
		return func(s worker.Stats) float64 {
			if s.Follow == nil {
				return 0
			}
			return f(s.Follow)
		}
	}
	return []prometheus.Collector{
		counter("dynapart_follow_records_total", "Stream records read (work --follow).",
			of(func(f *worker.FollowStats) float64 { return float64(f.Records) })),
		counter("dynapart_follow_versions_handled_total", "Item versions handled from the stream's records (done or dead-lettered at the version).",
			of(func(f *worker.FollowStats) float64 { return float64(f.Handled) })),
		counter("dynapart_follow_versions_superseded_total", "Stream records whose version was handled already (by a pass, a newer record or a reader before a takeover) or that a later record of the item in the same batch superseded.",
			of(func(f *worker.FollowStats) float64 { return float64(f.Superseded) })),
		counter("dynapart_follow_versions_unchanged_total", "Stream records of writes that changed no content (the inline ledger's own writes, rewrites of the same values that kept the item's state).",
			of(func(f *worker.FollowStats) float64 { return float64(f.Unchanged) })),
		counter("dynapart_follow_deleted_total", "Stream records of deleted items (and candidates found deleted): nothing to handle.",
			of(func(f *worker.FollowStats) float64 { return float64(f.Deleted) })),
		counter("dynapart_follow_rescans_total", "Passes made because the stream no longer held a shard's records after its checkpoint (older than its retention).",
			of(func(f *worker.FollowStats) float64 { return float64(f.Rescans) })),
		counter("dynapart_follow_consumed_read_capacity_units_total", "Read capacity units of the consistent reads of the items the stream's records named.",
			of(func(f *worker.FollowStats) float64 { return f.RCU })),
		gauge("dynapart_follow_lag_seconds", "Age of the oldest stream record read and not yet resolved, over the shards this worker reads; 0 when caught up.",
			of(func(f *worker.FollowStats) float64 { return f.Lag.Seconds() })),
		gauge("dynapart_follow_shards", "Stream shards this worker reads now (holds the lease of).",
			of(func(f *worker.FollowStats) float64 { return float64(heldShards(f.Shards)) })),
	}
}

// heldShards counts the shards this worker holds the lease of (Stats.Follow.Shards also lists the
// others of its last listing of the stream).
func heldShards(shards []follow.ShardStat) int {
	n := 0
	for _, s := range shards {
		if s.Owner != "" {
			n++
		}
	}
	return n
}

func (m *metrics) hooks() worker.Hooks {
	return worker.Hooks{
		OnItem: func(e worker.ItemEvent) {
			m.items.WithLabelValues(string(e.Outcome)).Inc()
			if e.Duration > 0 {
				m.latency.Observe(e.Duration.Seconds())
			}
		},
		OnLease: func(e worker.LeaseEvent) {
			m.leases.WithLabelValues(string(e.Kind)).Inc()
			if e.Kind == worker.LeaseAcquired && e.TookOver {
				m.takeover.Inc()
			}
		},
	}
}

// serve runs the /metrics endpoint until ctx ends.
func (m *metrics) serve(ctx context.Context, addr string) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, cli.Usagef("--metrics-addr %q: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	if m.mount != nil {
		m.mount(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}

func chainHooks(hs ...worker.Hooks) worker.Hooks {
	return worker.Hooks{
		OnItem: func(e worker.ItemEvent) {
			for _, h := range hs {
				if h.OnItem != nil {
					h.OnItem(e)
				}
			}
		},
		OnLease: func(e worker.LeaseEvent) {
			for _, h := range hs {
				if h.OnLease != nil {
					h.OnLease(e)
				}
			}
		},
	}
}
