package work

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/dynapart/dynapart/internal/progress"
	"github.com/dynapart/dynapart/worker"
)

// jsonProgress is `work --progress json`: one progress.Line a line on stdout, at every lease event,
// every tick, the first completion after a takeover ("first-after-takeover") and the exit. The
// demo reads these lines.
type jsonProgress struct {
	out io.Writer
	w   *worker.Worker // set once New returns, before Run

	mu       sync.Mutex // guards the fields below and writes to out
	firstAt  time.Time  // the worker's first completion
	tookOver bool       // the worker took a slot over
	reported bool       // first-after-takeover was printed
}

// hooks prints the lease events and the first completion after a takeover.
func (p *jsonProgress) hooks() worker.Hooks {
	return worker.Hooks{OnItem: func(e worker.ItemEvent) {
		if e.Outcome != worker.OutcomeCompleted {
			return
		}
		p.mu.Lock()
		if p.firstAt.IsZero() {
			p.firstAt = time.Now()
		}
		report := p.tookOver && !p.reported
		p.reported = p.reported || p.tookOver
		p.mu.Unlock()
		if report {
			p.print("first-after-takeover", true)
		}
	}, OnLease: func(e worker.LeaseEvent) {
		if e.Kind == worker.LeaseAcquired && e.TookOver {
			p.mu.Lock()
			p.tookOver = true
			p.mu.Unlock()
		}
		p.print("lease-"+string(e.Kind), false)
	}}
}

// print writes a line of event with the worker's stats, and the time of the first completion when
// withFirst.
func (p *jsonProgress) print(event string, withFirst bool) {
	s := p.w.Stats()
	l := progress.Line{Event: event, Time: time.Now().UnixMilli(), Owner: p.w.Config().Owner, Slot: s.Slot, Token: s.Token,
		State: string(s.State), Paused: s.Paused, Completed: s.Completed, Scanned: s.Scanned, Retried: s.Retried, Failed: s.DeadLettered,
		Takeovers: s.Takeovers, RCU: s.RCU, WCU: s.WCU, WriteThrottles: s.WriteThrottles, WriteRateAllowed: s.WriteRateAllowed}
	p.mu.Lock()
	defer p.mu.Unlock()
	if withFirst && !p.firstAt.IsZero() {
		l.FirstDone = p.firstAt.UnixMilli()
	}
	b, _ := json.Marshal(l)
	_, _ = p.out.Write(append(b, '\n'))
}
