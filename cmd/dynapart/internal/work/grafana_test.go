package work

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/worker"
)

// TestGrafanaDashboardMetrics: every metric the example dashboard queries is one the worker's
// /metrics serves, by its exact name.
func TestGrafanaDashboardMetrics(t *testing.T) {
	b, err := os.ReadFile("../../../../examples/grafana/dynapart.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &dash))

	m := newMetrics(func() worker.Stats { return worker.Stats{} })
	h := m.hooks() // make every labelled series exist
	h.OnItem(worker.ItemEvent{Outcome: worker.OutcomeCompleted, Duration: time.Millisecond})
	h.OnLease(worker.LeaseEvent{Kind: "acquired", TookOver: true})
	families, err := m.reg.Gather()
	require.NoError(t, err)
	served := map[string]bool{}
	for _, f := range families {
		served[f.GetName()] = true
	}
	name := regexp.MustCompile(`dynapart_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, metric := range name.FindAllString(tg.Expr, -1) {
				n++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(metric, "_bucket"), "_sum"), "_count")
				require.True(t, served[base], "dashboard queries %s, which /metrics does not serve", metric)
			}
		}
	}
	require.Greater(t, n, 10, "the dashboard queries metrics")
}
