package work

import (
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/worker"
)

// lineWriter sends each write (a whole log line) to its channel, dropping the lines it has no
// room for (so that the progress goroutine never waits on the test).
type lineWriter chan []byte

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- append([]byte(nil), p...):
	default:
	}
	return len(p), nil
}

// The first --progress log line tells the rate since the start: it said "rate 0" with 334 items
// already done, the meter having nothing to compare its first reading with.
func TestProgressLogRateFromTheFirstLine(t *testing.T) {
	var calls atomic.Int64
	stats := func() worker.Stats {
		if calls.Add(1) == 1 {
			return worker.Stats{Slot: 0, State: worker.StateWorking} // at the start
		}
		return worker.Stats{Slot: 0, State: worker.StateWorking, Completed: 334}
	}
	lines := make(lineWriter, 16)
	v := progressView{mode: "log", stats: stats, every: time.Millisecond, log: slog.New(slog.NewJSONHandler(lines, nil))}
	stop := v.start()
	first := <-lines
	stop()
	var l struct {
		Completed int64
		Rate      int
	}
	require.NoError(t, json.Unmarshal(first, &l), string(first))
	require.Positive(t, l.Rate, "the first line's rate: %s", first)
	require.Equal(t, int64(334), l.Completed)
}
