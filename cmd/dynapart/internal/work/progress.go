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
	mode  string // auto, bar, log, json or none
	w     *worker.Worker
	total int64 // the items expected, or 0
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
	every := map[string]time.Duration{"bar": 200 * time.Millisecond, "log": 5 * time.Second, "json": 250 * time.Millisecond}[v.mode]
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if v.mode == "bar" && v.estimate != nil {
			v.total = v.estimate()
		}
		var m cli.RateMeter
		cli.Ticks(stop, every, func(now time.Time) { v.show(now, &m) })
		if v.mode == "bar" {
			v.line.Clear()
		}
	}()
	return func() { close(stop); <-done }
}

// show shows the progress once.
func (v progressView) show(now time.Time, m *cli.RateMeter) {
	s := v.w.Stats()
	rate := m.Update(now, s.Completed)
	switch v.mode {
	case "bar":
		slot := "standby"
		if s.Slot >= 0 {
			slot = fmt.Sprintf("slot %d (token %d)", s.Slot, s.Token)
		}
		if s.Paused {
			slot += " PAUSED"
		}
		v.line.Set(fmt.Sprintf("%-20s ▕%s▏ %d done %6.0f/s ETA %s  retried %d failed %d%s%s",
			slot, cli.Bar(s.Completed, v.total, 24), s.Completed, rate, cli.ETA(s.Completed, v.total, rate), s.Retried, s.DeadLettered, throttleNote(s), followNote(s.Follow)))
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
