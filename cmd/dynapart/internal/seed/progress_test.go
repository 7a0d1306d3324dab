package seed

import (
	"bytes"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// lineWriter signals each line written to it.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.lines <- line
	}
}

// TestProgressFirstRate: the first progress line's rate is measured from the start, so items
// written before it count (it said rate=0/s with 11,875 of 30,000 items done).
func TestProgressFirstRate(t *testing.T) {
	w := &lineWriter{lines: make(chan string, 4)}
	var n counts
	stop := make(chan struct{})
	done := make(chan struct{})
	p := newProgress(w, "seed t", &n, 100)
	n.written.Add(40) // by the writers, after the start
	go func() { defer close(done); p.show(stop) }()
	line := <-w.lines
	close(stop)
	<-done
	m := regexp.MustCompile(`done=(\d+) total=100 rate=(\d+)/s`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	rate, _ := strconv.Atoi(m[2])
	require.Equal(t, "40", m[1])
	require.Greater(t, rate, 0, line)
}
