package work

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// progressView shows a worker's progress per --progress: a bar on stderr, a log line every 5s,
// JSON lines on stdout, or nothing.
type progressView struct {
	mode  string              // auto, bar, log, json or none
	stats func() worker.Stats // the worker's (Worker.Stats)
	every time.Duration       // the time between lines; 0: the mode's (200ms, 5s, 250ms)
	total int64               // the items of one slot's share, or 0 when not known
	// estimate, when set, tells total; the bar asks it in the background when it starts (the
	// other modes show no total), so the worker's start does not wait on it.
	estimate func() int64
	log      *slog.Logger
	line     *cli.StatusLine
	stderr   io.Writer
	json     *jsonProgress // for mode json
}

// start shows the progress until the returned function is called.
func (v progressView) start() func() {
	if v.mode == "none" {
		return func() {}
	}
	if v.mode == "auto" {
		v.mode = "log"
		if cli.IsTerminal(v.stderr) {
			v.mode = "bar"
		}
	}
	every := v.every
	if every == 0 {
		every = map[string]time.Duration{"bar": 200 * time.Millisecond, "log": 5 * time.Second, "json": 250 * time.Millisecond}[v.mode]
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The rate is measured from the start, so the first line's is the items done since then
		// (it said 0 with 334 items done).
		var m cli.RateMeter
		m.Update(time.Now(), v.stats().Completed)
		if v.mode == "bar" && v.estimate != nil {
			v.total = v.estimate()
		}
		bar := newSlotBar(v.total)
		cli.Ticks(stop, every, func(now time.Time) { v.show(now, &m, bar) })
		if v.mode == "bar" {
			v.line.Clear()
		}
	}()
	return func() { close(stop); <-done }
}

// show shows the progress once.
func (v progressView) show(now time.Time, m *cli.RateMeter, bar *slotBar) {
	s := v.stats()
	rate := m.Update(now, s.Completed)
	switch v.mode {
	case "bar":
		v.line.Set(bar.text(s, rate))
	case "log":
		args := []any{"slot", s.Slot, "state", s.State, "paused", s.Paused, "completed", s.Completed,
			"rate", int(rate), "retried", s.Retried, "dead_lettered", s.DeadLettered, "scanned", s.Scanned,
			"write_throttles", s.WriteThrottles, "write_rate_allowed", s.WriteRateAllowed}
		if f := s.Follow; f != nil {
			args = append(args, "stream_records", f.Records, "versions_handled", f.Handled, "superseded", f.Superseded,
				"unchanged", f.Unchanged, "deleted", f.Deleted, "stream_lag", f.Lag.Round(time.Millisecond), "shards", len(f.Shards))
		}
		v.log.Info("dynapart: progress", args...)
	case "json":
		v.json.print("progress", false)
	}
}

// followNote is the progress bar's note of a worker following the stream ("" when it does not).
func followNote(f *worker.FollowStats) string {
	if f == nil || len(f.Shards) == 0 {
		return ""
	}
	return fmt.Sprintf("  stream: %s, %s, lag %s", cli.Count(len(f.Shards), "shard"), cli.Count(f.Handled, "version"), f.Lag.Round(time.Second))
}

// throttleNote is the progress bar's note of throttled writes and the write rate allowed now.
func throttleNote(s worker.Stats) string {
	switch {
	case s.WriteThrottles == 0:
		return ""
	case s.WriteRateAllowed > 0:
		return fmt.Sprintf(" throttled %d (writes at %.0f WCU/s)", s.WriteThrottles, s.WriteRateAllowed)
	}
	return fmt.Sprintf(" throttled %d", s.WriteThrottles)
}
