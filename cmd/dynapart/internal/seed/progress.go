package seed

import (
	"fmt"
	"io"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// showProgress draws a live bar on a terminal, or logs a line every 2s otherwise, until stop: the
// items seen (written, or left alone because they existed) of total.
func showProgress(w io.Writer, stop <-chan struct{}, label string, n *counts, total int64) {
	tty := cli.IsTerminal(w)
	every := 2 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	var m cli.RateMeter
	tick := func(now time.Time) {
		done := n.written.Load() + n.existed.Load()
		rate := m.Update(now, done)
		if tty {
			cli.ClearLine(w)
			fmt.Fprintf(w, "%s ▕%s▏ %d/%d %6.0f/s ETA %s", label, cli.Bar(done, total, 30), done, total, rate, cli.ETA(done, total, rate))
		} else {
			fmt.Fprintf(w, "%s progress done=%d total=%d rate=%.0f/s\n", label, done, total, rate)
		}
	}
	cli.Ticks(stop, every, tick)
	if tty {
		cli.ClearLine(w)
	}
}
