package seed

import (
	"fmt"
	"io"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// progress shows the items seen (written, or left alone because they existed) of total.
type progress struct {
	w     io.Writer
	label string
	n     *counts
	total int64
	meter cli.RateMeter
}

// newProgress takes the first count now, before the writers start: the rate is measured from
// the start, so the first line's counts the items seen since (it said rate=0/s with 11,875 of
// 30,000 items done).
func newProgress(w io.Writer, label string, n *counts, total int64) *progress {
	p := &progress{w: w, label: label, n: n, total: total}
	p.meter.Update(time.Now(), p.seen())
	return p
}

func (p *progress) seen() int64 { return p.n.written.Load() + p.n.existed.Load() }

// show draws a live bar on a terminal, or logs a line every 2s otherwise, until stop.
func (p *progress) show(stop <-chan struct{}) {
	tty := cli.IsTerminal(p.w)
	every := 2 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	tick := func(now time.Time) {
		done := p.seen()
		rate := p.meter.Update(now, done)
		if tty {
			cli.ClearLine(p.w)
			fmt.Fprintf(p.w, "%s ▕%s▏ %d/%d %6.0f/s ETA %s", p.label, cli.Bar(done, p.total, 30), done, p.total, rate, cli.ETA(done, p.total, rate))
		} else {
			fmt.Fprintf(p.w, "%s progress done=%d total=%d rate=%.0f/s\n", p.label, done, p.total, rate)
		}
	}
	cli.Ticks(stop, every, tick)
	if tty {
		cli.ClearLine(p.w)
	}
}
