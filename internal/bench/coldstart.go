package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// ColdStart is the time from start to the first completed item, split into the time spent
// waiting on DynamoDB (calls timed at a loopback proxy in front of it, overlapping calls counted
// once) and the rest: dynapart's own start-up.
type ColdStart struct {
	Items                          int
	CLITotal, CLIDynamo, CLIBeyond Sample // ms, `dynapart work --once` process
	CLICalls                       Sample // DynamoDB calls before the first completion
	CLIWaits                       Sample // separate waits on DynamoDB among them (see busyBefore)
	LibTotal, LibDynamo, LibBeyond Sample // ms, worker.New + Run in this process
	LibCalls, LibWaits             Sample
}

// MeasureColdStart times, reps times, a CLI process (`dynapart work --once --complete-only`, from
// exec to its first completed item, read from its exit line) and the library (from worker.New to
// the OnItem hook of the first completion) on a fresh table of items each.
func (e *Env) MeasureColdStart(ctx context.Context, items, reps int) (*ColdStart, error) {
	pe, p, err := e.viaProxy(0)
	if err != nil {
		return nil, err
	}
	defer p.close()
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	cs := &ColdStart{Items: items}
	for rep := range reps {
		for _, cli := range []bool{true, false} {
			table, err := e.freshTable(ctx, "cold", items)
			if err != nil {
				return nil, err
			}
			p.reset()
			start, first, err := pe.coldOnce(ctx, table, leases, cli)
			e.dropTable(table)
			if err != nil {
				return nil, err
			}
			calls, busy, waits := p.busyBefore(start, first)
			total := first.Sub(start)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			if cli {
				cs.CLITotal, cs.CLIDynamo, cs.CLIBeyond = append(cs.CLITotal, ms(total)), append(cs.CLIDynamo, ms(busy)), append(cs.CLIBeyond, ms(total-busy))
				cs.CLICalls, cs.CLIWaits = append(cs.CLICalls, float64(calls)), append(cs.CLIWaits, float64(waits))
			} else {
				cs.LibTotal, cs.LibDynamo, cs.LibBeyond = append(cs.LibTotal, ms(total)), append(cs.LibDynamo, ms(busy)), append(cs.LibBeyond, ms(total-busy))
				cs.LibCalls, cs.LibWaits = append(cs.LibCalls, float64(calls)), append(cs.LibWaits, float64(waits))
			}
			e.logf("cold start rep %d/%d cli=%t: first item after %.0f ms (%.0f ms in %d DynamoDB calls, %d waits)", rep+1, reps, cli, ms(total), ms(busy), calls, waits)
		}
	}
	return cs, nil
}

// coldOnce starts one worker over table and returns when it started and when it completed its
// first item.
func (e *Env) coldOnce(ctx context.Context, table, leases string, cli bool) (start, first time.Time, err error) {
	if cli {
		start = time.Now()
		p, err := e.startWork("--table", table, "--lease-table", leases, "--workers", "1", "--once", "--complete-only",
			"--concurrency", "16", "--progress", "json", "--log-level", "warn")
		if err != nil {
			return start, first, err
		}
		if err := p.waitExit(5 * time.Minute); err != nil {
			return start, first, err
		}
		ms := p.last().FirstDone
		if ms == 0 {
			return start, first, fmt.Errorf("the process reported no first completion")
		}
		return start, time.UnixMilli(ms), nil
	}
	var once sync.Once
	start = time.Now()
	w, err := worker.New(worker.Config{Client: e.DB, Table: table, LeaseTable: leases, Workers: 1, Once: true,
		CompleteOnly: true, Concurrency: 16, Logger: quietLogger,
		Hooks: worker.Hooks{OnItem: func(ev worker.ItemEvent) {
			if ev.Outcome == worker.OutcomeCompleted {
				once.Do(func() { first = time.Now() })
			}
		}}})
	if err != nil {
		return start, first, err
	}
	if err := w.Run(ctx, func(context.Context, worker.Item) error { return nil }); err != nil {
		return start, first, err
	}
	if first.IsZero() {
		return start, first, fmt.Errorf("no item completed")
	}
	return start, first, nil
}

func (r *Results) coldStartSection(w writer) {
	w("## Cold start\n\n")
	c := r.ColdStart
	if c == nil {
		pending(w, ScenarioColdStart, r.Errors[ScenarioColdStart])
		return
	}
	w("Time from start to the first completed item (what Lambda pays on every invocation), on a fresh table of %s items and a fresh group. "+
		"DynamoDB's own time is measured at a loopback proxy in front of DynamoDB Local: the wall time during which at least one call was in flight "+
		"(overlapping calls counted once); the rest is dynapart's own start-up (and, for the process, exec and the Go runtime). "+
		"The CLI's first-completion time is the `first_done_ms` of its exit line (ms resolution). "+
		"*Waits* count the separate spans of that DynamoDB time: calls sent together are one wait, calls sent one after another are one each. "+
		"Every wait is a round trip that a region's latency (5–10 ms) adds to the cold start, so they matter more than the milliseconds on this loopback.\n\n", num(float64(c.Items), 0))
	w("| | start to first item, ms | in DynamoDB calls, ms | beyond DynamoDB's calls, ms | calls before the first item | waits on DynamoDB before the first item |\n|---|---|---|---|---|---|\n")
	w("| CLI process (`dynapart work --once --complete-only`) | %s | %s | %s | %s | %s |\n", c.CLITotal.Fmt(0, ""), c.CLIDynamo.Fmt(0, ""), c.CLIBeyond.Fmt(0, ""), c.CLICalls.Fmt(0, ""), c.CLIWaits.Fmt(0, ""))
	w("| library (`worker.New` + `Run`) | %s | %s | %s | %s | %s |\n\n", c.LibTotal.Fmt(0, ""), c.LibDynamo.Fmt(0, ""), c.LibBeyond.Fmt(0, ""), c.LibCalls.Fmt(0, ""), c.LibWaits.Fmt(0, ""))
}

func (r *Results) coldStartGoals() []Goal {
	c := r.ColdStart
	if c == nil {
		return nil
	}
	return []Goal{{"cold start beyond DynamoDB's calls (CLI process; library)", "<= 300 ms",
		c.CLIBeyond.Fmt(0, " ms") + "; " + c.LibBeyond.Fmt(0, " ms"), verdict(c.CLIBeyond.Median() <= 300 && c.LibBeyond.Median() <= 300)}}
}
