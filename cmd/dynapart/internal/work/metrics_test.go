package work

import (
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

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
		"dynapart_handler_seconds", "dynapart_items_total", "dynapart_lease_events_total", "dynapart_lease_held",
		"dynapart_paused", "dynapart_scanned_items_total", "dynapart_slot", "dynapart_takeovers_total",
		"dynapart_write_rate_allowed", "dynapart_write_throttles_total",
	}, names)
	require.Equal(t, 3.0, values["dynapart_write_throttles_total"])
	require.Equal(t, 2.5, values["dynapart_consumed_read_capacity_units_total"])
	require.Equal(t, 7.0, values["dynapart_scanned_items_total"])
}
