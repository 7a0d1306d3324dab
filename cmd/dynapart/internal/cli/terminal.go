package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal (live bars) rather than a pipe, file or buffer (log lines).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Bar renders a progress bar of width cells.
func Bar(done, total int64, width int) string {
	if total <= 0 {
		return strings.Repeat("░", width)
	}
	n := int(float64(width) * float64(min(done, total)) / float64(total))
	return strings.Repeat("█", n) + strings.Repeat("░", width-n)
}

// ETA formats the time left at rate items/s, rounded to the second, or "-" when unknown.
func ETA(done, total int64, rate float64) string {
	if total <= 0 || rate <= 0 || done >= total {
		return "-"
	}
	return time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
}

// RateMeter turns a growing counter into a rate over a sliding window.
type RateMeter struct {
	lastT time.Time
	lastN int64
	rate  float64
}

// Update records the counter n at now and returns the rate over the window.
func (r *RateMeter) Update(now time.Time, n int64) float64 {
	if !r.lastT.IsZero() {
		if dt := now.Sub(r.lastT).Seconds(); dt > 0 {
			inst := float64(n-r.lastN) / dt
			if r.rate == 0 {
				r.rate = inst
			} else {
				r.rate = 0.6*r.rate + 0.4*inst
			}
		}
	}
	r.lastT, r.lastN = now, n
	return r.rate
}

// ClearLine erases the terminal line w is on.
func ClearLine(w io.Writer) { fmt.Fprint(w, "\r\033[K") }

// Ticks calls tick every interval until stop is closed.
func Ticks(stop <-chan struct{}, every time.Duration, tick func(time.Time)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			tick(now)
		}
	}
}
