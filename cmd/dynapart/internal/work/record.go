package work

import (
	"bufio"
	"os"
	"strings"
	"sync"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// recorder is the file of `work --record`: the key of every item this worker completes, one JSON
// object a line, appended unbuffered so that it survives a SIGKILL. The demo audits these files
// (ReadRecord): a key in two of them was completed twice.
type recorder struct {
	mu sync.Mutex
	f  *os.File // nil until open
}

// open opens (creates, appends to) the file at path.
func (r *recorder) open(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return cli.Usagef("--record %q: %v", path, err)
	}
	r.f = f
	return nil
}

// hooks records every completed item.
func (r *recorder) hooks() worker.Hooks {
	return worker.Hooks{OnItem: func(e worker.ItemEvent) {
		if e.Outcome != worker.OutcomeCompleted {
			return
		}
		line, _ := cli.PlainJSON(e.Key)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.f != nil {
			_, _ = r.f.Write(append(line, '\n'))
		}
	}}
}

// Close closes the file; a nil recorder does nothing.
func (r *recorder) Close() error {
	if r == nil || r.f == nil {
		return nil
	}
	return r.f.Close()
}

// ReadRecord adds the count of every key recorded in the file at path to counts and returns how
// many it read; a missing file (a worker that completed nothing) reads as empty.
func ReadRecord(path string, counts map[string]int) (int, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			counts[line]++
			n++
		}
	}
	return n, sc.Err()
}
