package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// resizeShards is the --shards of index mode in the resize scenario (the work default): the
// group can grow up to that many slots.
const resizeShards = 16

// resizePlan is the resize scenario's slot counts: the fleet starts at Params.Slots, is scaled up
// to up (2 new workers join without --workers) and later down to down.
type resizePlan struct{ up, down int }

// Resize runs the fleet (Params.Mode) with a latency-bound handler and changes its slot count
// while it works: `dynapart scale` up to 5 slots at a random moment, two new workers join without
// --workers (at the group's current n), one worker that held a slot under the old plan is
// SIGKILLed right after the resize (while the fleet re-plans: within a heartbeat and a half) and
// a replacement joins; later `dynapart scale` down to 3 slots. Every worker left must exit 0, no
// item may be done twice or missed, and side effects may repeat only for the items in flight at
// the kill (a resize alone repeats none). The group's meta must end at n 3, plan epoch 2.
func Resize(ctx context.Context, env Env, p Params) *Result {
	if p.Mode == "" {
		p.Mode = string(scan.ModeSegment)
	}
	plan := resizePlan{up: 5, down: 3}
	return run(ctx, env, "resize-"+p.Mode, p, env.Endpoint, func(ctx context.Context, f *fixture) error {
		f.watch()
		// Longer leases than the kill scenario (as in two-groups): up to seven workers share the
		// machine. A lease lost by load all the same counts as a failure of its own.
		trace := filepath.Join(f.dir, "runs.log")
		extra := []string{"--batch-claims", "--lease-ttl", "5s", "--heartbeat", "1s", "--exec", "sleep 0.02; " +
			fmt.Sprintf(`printf '%%s %%s %%s %%s %%s\n' "$DYNAPART_KEY" "$DYNAPART_SLOT" "$DYNAPART_TOKEN" "$DYNAPART_ATTEMPT" "$(date +%%s.%%N)" >> '%s'; `, trace) +
			f.handler()}
		f.countLeaseLosses(batchInFlight(f.p.Concurrency))
		rt := &resizeTrace{path: trace}
		f.audits = append(f.audits, rt.check)
		if err := f.startFleet(ctx, extra...); err != nil {
			return err
		}
		f.res.event("mode %s: %d slots + %d standby, handler sleeps 20ms, --batch-claims", f.p.Mode, f.p.Slots, f.p.Standbys)
		ths := f.thresholds(1, 0.15, 0.3)
		if ok, err := f.waitCompleted(ctx, ths[0]); err != nil || !ok {
			return err
		}
		holders := f.holders()
		if err := f.scale(ctx, plan.up); err != nil {
			return err
		}
		joiners := plan.up - f.p.Slots - f.p.Standbys
		for range joiners {
			if _, err := f.join(extra...); err != nil {
				return err
			}
		}
		f.res.event("started %d workers without --workers", joiners)
		if err := f.killDuringReplan(ctx, holders, extra, rt); err != nil {
			return err
		}
		if ok, err := f.waitCompleted(ctx, f.thresholds(1, 0.55, 0.7)[0]); err != nil || !ok {
			f.res.event("the fleet ended before the scale-down")
			return err
		}
		if err := f.scale(ctx, plan.down); err != nil {
			return err
		}
		f.audits = append(f.audits, func(r *Result, _ *audit) { f.checkPlan(r, plan.down, 2) })
		return nil
	})
}

// holders are the live workers that hold a slot and work.
func (f *fixture) holders() []*Proc {
	var out []*Proc
	for _, p := range f.procs {
		if l := p.Last(); p.Alive() && l.Slot >= 0 && l.State == "working" {
			out = append(out, p)
		}
	}
	return out
}

// scale runs `dynapart scale` to m slots.
func (f *fixture) scale(ctx context.Context, m int) error {
	args := []string{"scale", "--group", f.group(), "--lease-table", f.leases, "--workers", fmt.Sprint(m), "--endpoint", f.direct}
	cmd := exec.CommandContext(ctx, f.env.Bin, args...)
	cmd.Env = cliEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: dynapart %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	f.res.event("at %d/%d done: %s", f.completed(), f.p.Items, strings.TrimSpace(string(out)))
	return nil
}

// join starts one more worker without --workers: it joins the group at its current n.
func (f *fixture) join(extra ...string) (*Proc, error) {
	owner := fmt.Sprintf("w%d", f.n)
	f.n++
	p, err := StartWorker(f.env.Bin, f.dir, owner, f.notify, cliEnv(), withoutFlag(f.workArgs(extra...), "--workers")...)
	if err != nil {
		return nil, err
	}
	f.procs = append(f.procs, p)
	return p, nil
}

// withoutFlag drops every "name value" pair from args.
func withoutFlag(args []string, name string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == name {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// killDuringReplan SIGKILLs one of the old plan's holders 0-1.5s after the resize (the holders
// notice it within a heartbeat, 1s, then drain, save and release), and starts a replacement
// that joins without --workers.
func (f *fixture) killDuringReplan(ctx context.Context, holders []*Proc, extra []string, rt *resizeTrace) error {
	var alive []*Proc
	for _, p := range holders {
		if p.Alive() {
			alive = append(alive, p)
		}
	}
	if len(alive) == 0 {
		f.res.event("no holder of the old plan left to kill")
		return nil
	}
	victim := alive[f.rng.IntN(len(alive))]
	select {
	case <-time.After(time.Duration(f.rng.IntN(1500)) * time.Millisecond):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	l := victim.Last()
	victim.Kill()
	rt.victim = victim.Owner
	// In flight at a kill with --batch-claims (as in Kill): the handlers running, the handled
	// items queued for a batched completion and the completion transaction being written.
	f.res.SideEffectBound += batchInFlight(f.p.Concurrency)
	f.res.event("SIGKILL %s during the re-plan (last seen: slot %d, token %d, %s, event %q) at %d/%d done",
		victim.Owner, l.Slot, l.Token, l.State, l.Event, f.completed(), f.p.Items)
	_, err := f.join(extra...)
	return err
}

// checkPlan checks the group's meta item: n slots at plan epoch epoch.
func (f *fixture) checkPlan(r *Result, n int, epoch int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lc, err := lock.New(f.db, f.leases)
	if err != nil {
		r.fail("%v", err)
		return
	}
	st, err := lc.GroupState(ctx, f.group())
	switch {
	case err != nil:
		r.fail("read the group's plan: %v", err)
	case !st.Exists || st.N != n || st.Epoch != epoch:
		r.fail("the group's plan is n %d epoch %d (exists %v), want n %d epoch %d", st.N, st.Epoch, st.Exists, n, epoch)
	default:
		r.event("the group ended at n %d, plan epoch %d", st.N, st.Epoch)
	}
}

// markPending puts every item of the table into the pending index of index mode (dp_shard of
// resizeShards shards), as a producer would.
func (f *fixture) markPending(ctx context.Context) error {
	pg := dynamodb.NewScanPaginator(f.db, &dynamodb.ScanInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("chaos: mark pending: %w", err)
		}
		for lo := 0; lo < len(page.Items); lo += 25 {
			var reqs []types.WriteRequest
			for _, it := range page.Items[lo:min(lo+25, len(page.Items))] {
				scan.MarkPending(it, "id", "dp_shard", resizeShards)
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
			}
			for len(reqs) > 0 {
				out, err := f.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{f.table: reqs}})
				if err != nil {
					return fmt.Errorf("chaos: mark pending: %w", err)
				}
				reqs = out.UnprocessedItems[f.table]
			}
		}
	}
	return nil
}

// resizeTrace is the handler's trace of every run (key, slot, token, attempt, time) and the
// worker the scenario killed.
type resizeTrace struct {
	path   string
	victim string
}

// check attributes every item whose handler ran more than once: to the kill when one of its runs
// was under a lease (slot, token) the killed worker held, or to a lease lost by load when one was
// under that lease. Any other repeat, in a run whose lease history shows no takeover but the
// kill's, was caused by a resize alone: a violation. It lists repeated items with their runs, the
// unexplained ones first.
func (rt *resizeTrace) check(r *Result, a *audit) {
	if r.SideEffectDuplicates == 0 {
		return
	}
	runs := map[string][][3]string{}
	fh, err := os.Open(rt.path)
	if err != nil {
		r.fail("%v", err)
		return
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 5 && a.sideEffect[fs[0]] > 1 {
			runs[fs[0]] = append(runs[fs[0]], [3]string{fs[1], fs[2], fs[3] + " at " + fs[4]})
		}
	}
	keys := make([]string, 0, len(runs))
	for k := range runs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// A repeat is explained by a run under the killed worker's lease or a lease lost by load.
	// Unexplained items are listed first: they are the ones a resize repeated.
	var other, explained []string
	desc := map[string]string{}
	for _, k := range keys {
		var parts []string
		byFailure := false
		for _, run := range runs[k] {
			slot, _ := strconv.ParseInt(run[0], 10, 64)
			token, _ := strconv.ParseInt(run[1], 10, 64)
			lease := [2]int64{slot, token}
			owner := a.leases.Owners[lease]
			byFailure = byFailure || (owner != "" && owner == rt.victim) || a.lost[lease]
			parts = append(parts, fmt.Sprintf("%s (slot %s token %s) attempt %s", owner, run[0], run[1], run[2]))
		}
		desc[k] = strings.Join(parts, "; ")
		if byFailure {
			explained = append(explained, k)
		} else {
			other = append(other, k)
		}
	}
	listed := slices.Concat(other, explained)
	for _, k := range listed[:min(len(listed), 5+min(len(other), 10))] {
		r.event("handler runs of %s: %s", k, desc[k])
	}
	r.event("%d items ran their handler more than once, %d of them not in a run of the killed worker %s nor under a lease lost by load", len(keys), len(other), rt.victim)
	if len(other) > 0 && r.Leases.Takeovers <= 1 {
		r.fail("%d items ran their handler again with no run by the killed worker and no other takeover (a resize repeated side effects), e.g. %s",
			len(other), other[0])
	}
}
