package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// Steal measures work stealing in once-jobs: 3 once-workers (library, in this process) on a
// filter-mode table split on a numeric attribute, with latency-bound handlers (a sleep), on an
// evenly split table and on a skewed one (slot 0's share 3x each other slot's), with and without
// stealing. Wall time from the start of the three Runs until all have returned.
type Steal struct {
	CLI         bool // the workers are `dynapart work --exec 'sleep ...'` processes, not the library
	Items       int
	Workers     int
	Concurrency int
	Handler     time.Duration
	Points      []*StealPoint
}

// StealPoint is one table layout with or without stealing.
type StealPoint struct {
	Skewed, Steal bool
	Seconds       Sample
	Stolen        Sample // units stolen per run
}

// The variants of the steal scenario, in the order they run each repetition.
var stealVariants = []struct{ skewed, steal bool }{{false, true}, {true, true}, {true, false}}

// Point returns the point of a layout and stealing setting, or nil.
func (s *Steal) Point(skewed, steal bool) *StealPoint {
	for _, p := range s.Points {
		if p.Skewed == skewed && p.Steal == steal {
			return p
		}
	}
	return nil
}

// MeasureSteal runs every variant reps times, interleaved, each on a fresh table of items items.
func (e *Env) MeasureSteal(ctx context.Context, items, conc int, handler time.Duration, reps int, cli bool) (*Steal, error) {
	s := &Steal{CLI: cli, Items: items, Workers: 3, Concurrency: conc, Handler: handler}
	for _, v := range stealVariants {
		s.Points = append(s.Points, &StealPoint{Skewed: v.skewed, Steal: v.steal})
	}
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	for rep := range reps {
		for _, p := range s.Points {
			secs, stolen, err := e.stealOnce(ctx, s, leases, p.Skewed, p.Steal)
			if err != nil {
				return nil, fmt.Errorf("skewed %v steal %v: %w", p.Skewed, p.Steal, err)
			}
			p.Seconds, p.Stolen = append(p.Seconds, secs), append(p.Stolen, float64(stolen))
			e.logf("steal rep %d/%d: skewed %-5v steal %-5v %6.2f s, %d units stolen", rep+1, reps, p.Skewed, p.Steal, secs, stolen)
		}
	}
	return s, nil
}

// stealOnce runs the three workers once on a fresh table and returns the wall time.
func (e *Env) stealOnce(ctx context.Context, s *Steal, leases string, skewed, steal bool) (float64, int64, error) {
	table, err := e.createTable(ctx, "steal")
	if err != nil {
		return 0, 0, err
	}
	defer e.dropTable(table)
	if err := e.seedSplit(ctx, table, s.Items, s.Workers, skewed); err != nil {
		return 0, 0, err
	}
	group := tableName("steal")
	if s.CLI {
		secs, err := e.stealCLI(s, table, leases, group, steal)
		return secs, 0, err
	}
	ws := make([]*worker.Worker, s.Workers)
	for i := range ws {
		ws[i], err = worker.New(worker.Config{Client: e.DB, Table: table, LeaseTable: leases, Group: group,
			Workers: s.Workers, Once: true, NoSteal: !steal, Mode: scan.ModeFilter, PartitionAttr: "p",
			Concurrency: s.Concurrency, Owner: fmt.Sprintf("w%d", i), Logger: quietLogger})
		if err != nil {
			return 0, 0, err
		}
	}
	h := func(ctx context.Context, _ worker.Item) error {
		select {
		case <-time.After(s.Handler):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	start := time.Now()
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { errs[i] = w.Run(ctx, h) })
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	var done, stolen int64
	for _, w := range ws {
		st := w.Stats()
		done, stolen = done+st.Completed, stolen+st.Stolen
		e.logf("steal:   %s: %d leases, %d passes, %d completed, %d skipped, %d units stolen", w.Config().Owner, st.Leases, st.Passes, st.Completed, st.Skipped, st.Stolen)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	if done != int64(s.Items) {
		return 0, 0, fmt.Errorf("completed %d of %d items", done, s.Items)
	}
	return secs, stolen, nil
}

// stealCLI runs the workers as `dynapart work --once --exec 'sleep ...'` processes and returns
// the wall time until all have exited.
func (e *Env) stealCLI(s *Steal, table, leases, group string, steal bool) (float64, error) {
	args := []string{"--table", table, "--lease-table", leases, "--group", group, "--workers", strconv.Itoa(s.Workers),
		"--once", "--mode", "filter", "--partition-attr", "p", "--concurrency", strconv.Itoa(s.Concurrency),
		"--exec", fmt.Sprintf("sleep %.3f", s.Handler.Seconds()), "--progress", "json", "--log-level", "warn"}
	if !steal {
		args = append(args, "--no-steal")
	}
	start := time.Now()
	ps := make([]*proc, s.Workers)
	for i := range ps {
		p, err := e.startWork(append(args, "--owner", fmt.Sprintf("w%d", i))...)
		if err != nil {
			for _, q := range ps[:i] {
				q.kill()
			}
			return 0, err
		}
		ps[i] = p
	}
	var errs []error
	var done int64
	for _, p := range ps {
		errs = append(errs, p.waitExit(10*time.Minute))
		done += p.last().Completed
	}
	secs := time.Since(start).Seconds()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if done != int64(s.Items) {
		return 0, fmt.Errorf("completed %d of %d items", done, s.Items)
	}
	return secs, nil
}

// seedSplit writes n items whose attribute p maps them to slots (filter mode, p mod slots):
// evenly, or with slot 0's share 3x each other slot's.
func (e *Env) seedSplit(ctx context.Context, table string, n, slots int, skewed bool) error {
	big := n / slots
	if skewed {
		big = 3 * n / (slots + 2)
	}
	for lo := 0; lo < n; lo += 25 {
		var reqs []types.WriteRequest
		for i := lo; i < min(lo+25, n); i++ {
			p := slots * i
			if i >= big {
				p += 1 + (i-big)*(slots-1)/(n-big)
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"id":      &types.AttributeValueMemberS{Value: itemKey(i)},
				"p":       &types.AttributeValueMemberN{Value: strconv.Itoa(p)},
				"payload": &types.AttributeValueMemberS{Value: payload},
			}}})
		}
		for len(reqs) > 0 {
			out, err := e.DB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			if err != nil {
				return fmt.Errorf("seed %s: %w", table, err)
			}
			reqs = out.UnprocessedItems[table]
		}
	}
	return nil
}

func (r *Results) stealSection(w writer) {
	w("## Work stealing on a skewed table\n\n")
	s := r.Steal
	if s == nil {
		pending(w, ScenarioSteal, r.Errors[ScenarioSteal])
		return
	}
	how := "the library, in the runner's process, every handler a %d ms sleep (latency-bound, like `--exec` that sleeps; the library stands in for the CLI so that 2 cores measure stealing, not process starts)"
	if s.CLI {
		how = "`dynapart work --once --exec 'sleep'` processes, every handler a %d ms sleep"
	}
	w("%d once-workers ("+fmt.Sprintf(how, s.Handler.Milliseconds())+") in filter mode on a numeric attribute, %d handlers each. "+
		"A fresh table of %s items per run: split evenly (each slot a third), or skewed (slot 0 three fifths, the others a fifth each). "+
		"Wall time until every worker has returned; the ratio is to the even table with stealing in the same repetition.\n\n",
		s.Workers, s.Concurrency, num(float64(s.Items), 0))
	w("| table | stealing | wall time | vs even table | units stolen |\n|---|---|---|---|---|\n") // units stolen: library runs only
	even := s.Point(false, true)
	for _, p := range s.Points {
		layout, on := "even", "on"
		if p.Skewed {
			layout = "skewed 3:1:1"
		}
		if !p.Steal {
			on = "off (`--no-steal`)"
		}
		w("| %s | %s | %s | %s | %s |\n", layout, on, p.Seconds.Fmt(2, " s"), Ratio(p.Seconds, even.Seconds).X(), p.Stolen.Fmt(0, ""))
	}
	w("\n")
}

// stealGoals is the target: a skewed table with stealing within 1.3x of an even one.
func (r *Results) stealGoals() []Goal {
	s := r.Steal
	if s == nil {
		return nil
	}
	x := Ratio(s.Point(true, true).Seconds, s.Point(false, true).Seconds)
	return []Goal{{fmt.Sprintf("skewed table (3:1:1) with stealing vs even table, %d ms handlers", s.Handler.Milliseconds()), "<= 1.3x", x.X(), verdict(x.Median() <= 1.3)}}
}
