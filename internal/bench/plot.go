package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var palette = []color.Color{
	color.RGBA{R: 90, G: 90, B: 90, A: 255},    // plain
	color.RGBA{R: 31, G: 119, B: 180, A: 255},  // complete-only
	color.RGBA{R: 214, G: 39, B: 40, A: 255},   // claim+complete
	color.RGBA{R: 44, G: 160, B: 44, A: 255},   // batched
	color.RGBA{R: 148, G: 103, B: 189, A: 255}, // CLI complete-only
	color.RGBA{R: 255, G: 127, B: 14, A: 255},  // CLI claim+complete
	color.RGBA{R: 23, G: 190, B: 207, A: 255},
}

// WritePlots draws the PNG plots of r into dir and returns their paths relative to relTo (the
// report's directory), by name.
func (r *Results) WritePlots(dir, relTo string) (Plots, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	plots := Plots{}
	add := func(name string, f *figure, w, h vg.Length) error {
		path := filepath.Join(dir, name+".png")
		if err := f.save(w, h, path); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		rel, err := filepath.Rel(relTo, path)
		if err != nil {
			rel = path
		}
		plots[name] = filepath.ToSlash(rel)
		return nil
	}
	if r.Throughput != nil {
		if err := add(PlotThroughput, r.throughputPlot(), 10*vg.Inch, 4.5*vg.Inch); err != nil {
			return nil, err
		}
	}
	if r.Takeover != nil && len(r.Takeover.Series) > 0 {
		if err := add(PlotTakeover, r.takeoverPlot(), 10*vg.Inch, 4*vg.Inch); err != nil {
			return nil, err
		}
	}
	return plots, nil
}

// figure is a plot whose legend is drawn in a column to the right of it, never over its lines,
// and whose y axis is labelled at readable steps.
type figure struct {
	*plot.Plot
	legend plot.Legend
}

func newFigure() *figure {
	f := &figure{Plot: plot.New(), legend: plot.NewLegend()}
	f.legend.Top, f.legend.Left = true, true
	f.legend.TextStyle.Font.Size = vg.Points(10)
	f.legend.Padding = vg.Points(3)
	f.Y.Tick.Marker = readableTicks{}
	return f
}

// save writes the figure as a PNG of w x h: the plot, then the legend to its right.
func (f *figure) save(w, h vg.Length, path string) error {
	c, err := draw.NewFormattedCanvas(w, h, "png")
	if err != nil {
		return err
	}
	dc := draw.New(c)
	gap := vg.Points(12)
	lw := f.legend.Rectangle(dc).Size().X + 2*gap
	f.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	titleRoom := f.Title.TextStyle.Height(f.Title.Text) + f.Title.Padding + gap
	f.legend.Draw(draw.Crop(dc, w-lw+gap, -gap, 0, -titleRoom))
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(out); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readableTicks labels an axis every 1, 2, 2.5 or 5 x 10^k, at most seven labels from 0 up, with
// thousands separated ("2,500"), and a minor tick between two labels.
type readableTicks struct{}

func (readableTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: num(lo, 0)}}
	}
	step := niceStep((hi - lo) / 6)
	prec := max(0, int(math.Ceil(-math.Log10(step))))
	var ts []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi+step*1e-9; i++ {
		v := i * step
		ts = append(ts, plot.Tick{Value: v, Label: num(v, prec)})
		if minor := v + step/2; minor < hi {
			ts = append(ts, plot.Tick{Value: minor})
		}
	}
	return ts
}

// niceStep is the least 1, 2, 2.5 or 5 x 10^k at least raw.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// throughputPlot: items/s (median, with min–max error bars) versus concurrency, per variant, and
// DynamoDB Local's UpdateItem ceiling.
func (r *Results) throughputPlot() *figure {
	p := newFigure()
	p.Title.Text = "items/s versus concurrency (median, bars: min–max)"
	p.X.Label.Text = "handlers in flight (concurrency, log scale)"
	p.Y.Label.Text = "items/s"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(concTicks(r.Options.Concurrencies))
	p.Add(plotter.NewGrid())
	for i, v := range Variants {
		var pts plotter.XYs
		var errs plotter.YErrors
		for _, c := range r.Options.Concurrencies {
			pt := r.Throughput.Point(v, c)
			if pt == nil || len(pt.ItemsPerSec) == 0 {
				continue
			}
			med := pt.ItemsPerSec.Median()
			pts = append(pts, plotter.XY{X: float64(c), Y: med})
			errs = append(errs, struct{ Low, High float64 }{med - pt.ItemsPerSec.Min(), pt.ItemsPerSec.Max() - med})
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			continue
		}
		line.Color, points.Color = palette[i], palette[i]
		line.Width = vg.Points(1.5)
		points.Shape = draw.CircleGlyph{}
		if v == VariantPlain {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYer
			plotter.YErrorer
		}{pts, errs})
		if err == nil {
			eb.Color = palette[i]
			p.Add(eb)
		}
		p.Add(line, points)
		p.legend.Add(v, line, points)
	}
	if c := r.Ceiling; c != nil && len(c.UpdatesPerSec) > 0 {
		lo, hi := float64(r.Options.Concurrencies[0]), float64(r.Options.Concurrencies[len(r.Options.Concurrencies)-1])
		for _, h := range []struct {
			label string
			v     float64
			col   color.Color
		}{
			{fmt.Sprintf("ceiling: UpdateItem/s (%d in flight)", c.Concurrency), c.UpdatesPerSec.Median(), color.RGBA{R: 255, G: 127, B: 14, A: 255}},
			{"ceiling: TransactWriteItems items/s", c.TxItemsPerSec.Median(), palette[4]},
		} {
			l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: h.v}, {X: hi, Y: h.v}})
			if err != nil {
				continue
			}
			l.Color = h.col
			l.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.legend.Add(h.label, l)
		}
	}
	p.Y.Min = 0
	p.Y.Max *= 1.06 // the ceiling's line below the frame
	// A log axis needs a range above 0: a single concurrency (-concurrency 1) would give [c, c],
	// which the plot widens to 0 and then refuses.
	if cs := r.Options.Concurrencies; len(cs) > 0 {
		p.X.Min, p.X.Max = float64(slices.Min(cs))/1.5, float64(slices.Max(cs))*1.5
	}
	return p
}

func concTicks(cs []int) []plot.Tick {
	t := make([]plot.Tick, len(cs))
	for i, c := range cs {
		t[i] = plot.Tick{Value: float64(c), Label: fmt.Sprint(c)}
	}
	return t
}

// takeoverPlot: items completed by the holder and the standby over time, around the SIGKILL and
// the SIGTERM of their first repetitions.
func (r *Results) takeoverPlot() *figure {
	t := r.Takeover
	p := newFigure()
	p.Title.Text = fmt.Sprintf("takeover timeline (lease TTL %s): items completed, t = 0 at the signal", t.Config.LeaseTTL)
	p.X.Label.Text = "seconds since the signal"
	p.Y.Label.Text = "items completed by the process"
	p.Add(plotter.NewGrid())
	series := []struct {
		name string
		pts  []TimelinePoint
		dash bool
	}{{"SIGKILL", t.Series, false}, {"SIGTERM", t.TermSer, true}}
	i := 0
	var ymax float64
	for _, s := range series {
		for _, who := range []string{"holder", "standby"} {
			var xy plotter.XYs
			for _, pt := range s.pts {
				if pt.Worker == who && pt.At >= -2*time.Second {
					xy = append(xy, plotter.XY{X: pt.At.Seconds(), Y: float64(pt.Completed)})
					ymax = max(ymax, float64(pt.Completed))
				}
			}
			if len(xy) == 0 {
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				continue
			}
			l.Color = palette[1+i%4]
			l.Width = vg.Points(1.5)
			if s.dash {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l)
			p.legend.Add(s.name+": "+who, l)
			i++
		}
	}
	mark := func(x float64, label string, col color.Color) {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: ymax}})
		if err != nil {
			return
		}
		l.Color = col
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(l)
		p.legend.Add(label, l)
	}
	mark(0, "signal", color.Black)
	mark(t.Config.LeaseTTL.Seconds()+t.Config.StandbyPoll.Seconds(), "lease TTL + one poll", color.RGBA{R: 255, G: 127, B: 14, A: 255})
	return p
}
