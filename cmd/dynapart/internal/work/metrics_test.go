package work

import (
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/worker"
)

// TestMetricNamesFollowPrometheusConventions: counters end in _total, gauges do not, and the
// names are the ones README documents.
func TestMetricNamesFollowPrometheusConventions(t *testing.T) {
	m := newMetrics(func() worker.Stats {
		return worker.Stats{RCU: 2.5, WCU: 1, Scanned: 7, Slot: 1, State: "working", WriteThrottles: 3, WriteRateAllowed: 25}
	})
	h := m.hooks()
	h.OnItem(worker.ItemEvent{Outcome: "completed"})
	h.OnLease(worker.LeaseEvent{Kind: "acquired", TookOver: true})
	fams, err := m.reg.Gather()
	require.NoError(t, err)
	var names []string
	values := map[string]float64{}
	for _, f := range fams {
		name := f.GetName()
		names = append(names, name)
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			require.True(t, strings.HasSuffix(name, "_total"), "counter %s must end in _total", name)
			values[name] = f.GetMetric()[0].GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			require.False(t, strings.HasSuffix(name, "_total"), "gauge %s must not end in _total", name)
		}
	}
	sort.Strings(names)
	require.Equal(t, []string{
		"dynapart_consumed_read_capacity_units_total", "dynapart_consumed_write_capacity_units_total",
		"dynapart_follow_consumed_read_capacity_units_total", "dynapart_follow_deleted_total", "dynapart_follow_lag_seconds",
		"dynapart_follow_records_total", "dynapart_follow_rescans_total", "dynapart_follow_shards",
		"dynapart_follow_versions_handled_total", "dynapart_follow_versions_superseded_total", "dynapart_follow_versions_unchanged_total",
		"dynapart_handler_seconds", "dynapart_items_total", "dynapart_lease_events_total", "dynapart_lease_held",
		"dynapart_paused", "dynapart_scanned_items_total", "dynapart_slot", "dynapart_takeovers_total",
		"dynapart_write_rate_allowed", "dynapart_write_throttles_total",
	}, names)
	require.Zero(t, values["dynapart_follow_records_total"], "not following: 0")
	require.Equal(t, 3.0, values["dynapart_write_throttles_total"])
	require.Equal(t, 2.5, values["dynapart_consumed_read_capacity_units_total"])
	require.Equal(t, 7.0, values["dynapart_scanned_items_total"])
}

// TestFollowMetrics: the follow counters and gauges are Stats.Follow's; the shards gauge counts
// the shards the worker holds, not every shard of its listing.
func TestFollowMetrics(t *testing.T) {
	m := newMetrics(func() worker.Stats {
		return worker.Stats{Follow: &worker.FollowStats{Records: 40, Handled: 9, Superseded: 5, Unchanged: 20, Deleted: 4, Rescans: 1,
			RCU: 4.5, Lag: 2500 * time.Millisecond, Shards: []follow.ShardStat{{Shard: "a", Owner: "w1"}, {Shard: "b"}, {Shard: "c", Owner: "w1"}}}}
	})
	fams, err := m.reg.Gather()
	require.NoError(t, err)
	follows := map[string]float64{}
	for _, f := range fams {
		name := f.GetName()
		switch {
		case !strings.HasPrefix(name, "dynapart_follow_"):
		case f.GetType() == dto.MetricType_COUNTER:
			follows[name] = f.GetMetric()[0].GetCounter().GetValue()
		case f.GetType() == dto.MetricType_GAUGE:
			follows[name] = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	require.Equal(t, map[string]float64{
		"dynapart_follow_records_total":                      40,
		"dynapart_follow_versions_handled_total":             9,
		"dynapart_follow_versions_superseded_total":          5,
		"dynapart_follow_versions_unchanged_total":           20,
		"dynapart_follow_deleted_total":                      4,
		"dynapart_follow_rescans_total":                      1,
		"dynapart_follow_consumed_read_capacity_units_total": 4.5,
		"dynapart_follow_lag_seconds":                        2.5,
		"dynapart_follow_shards":                             2,
	}, follows)
}
