package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
)

// TestReadableTicks: the y axis is labelled at 1, 2, 2.5 or 5 x 10^k steps, thousands separated.
func TestReadableTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (readableTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	require.Equal(t, []string{"0", "500", "1,000", "1,500", "2,000", "2,500"}, labels(0, 2600))
	require.Equal(t, []string{"0", "20", "40", "60", "80"}, labels(0, 95))
	require.Equal(t, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}, labels(0, 1))
	require.Equal(t, []string{"7"}, labels(7, 7))
	var minor []plot.Tick
	for _, tk := range (readableTicks{}).Ticks(0, 2600) {
		if tk.Label == "" {
			minor = append(minor, tk)
		}
	}
	require.Len(t, minor, 5, "a minor tick between two labels")
}

// TestPlotsDrawn draws both plots from a made-up run: the legends go beside the plots.
func TestPlotsDrawn(t *testing.T) {
	r := &Results{Options: Options{Concurrencies: []int{1, 4, 16, 64}}, Throughput: &Throughput{},
		Ceiling: &Ceiling{Concurrency: 32, UpdatesPerSec: Sample{2400}, TxItemsPerSec: Sample{2300}}}
	for i, v := range Variants {
		for j, c := range r.Options.Concurrencies {
			y := float64(600+300*j) * (1 - 0.1*float64(i))
			r.Throughput.Points = append(r.Throughput.Points, &ThroughputPoint{Variant: v, Concurrency: c, ItemsPerSec: Sample{y * 0.95, y, y * 1.05}})
		}
	}
	r.Takeover = &Takeover{Config: TakeoverConfig{LeaseTTL: 3 * time.Second, StandbyPoll: time.Second}}
	for s := -2; s <= 8; s++ {
		at := time.Duration(s) * time.Second
		holder := int64(min(s, 0)*100 + 200)
		r.Takeover.Series = append(r.Takeover.Series, TimelinePoint{Worker: "holder", At: at, Completed: holder})
		r.Takeover.Series = append(r.Takeover.Series, TimelinePoint{Worker: "standby", At: at, Completed: int64(max(0, s-4) * 100)})
	}
	dir := t.TempDir()
	if keep := os.Getenv("DYNAPART_PLOT_DIR"); keep != "" {
		dir = keep
	}
	plots, err := r.WritePlots(dir, dir)
	require.NoError(t, err)
	for _, name := range []string{PlotThroughput, PlotTakeover} {
		st, err := os.Stat(filepath.Join(dir, plots[name]))
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(10_000), name)
	}
}
