package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dynapart/dynapart/internal/progress"
)

// Partition cuts a slot holder off DynamoDB (its requests go through its own proxy, which holds
// them and resets their connections, see FaultProxy.Cut) until a standby has taken its slot over
// and a while past, then reconnects it. Every write it sends afterwards that is fenced by its old
// lease (a lease write with its token, a claim write with its owner, slot and token) must be
// refused by DynamoDB; the audit counts them and any that landed is a violation. The ledger audit
// checks that nothing was completed twice.
func Partition(ctx context.Context, env Env, p Params) *Result {
	p.defaults()
	proxy, err := StartProxy(env.Endpoint, p.Seed, Rates{})
	if err != nil {
		r := &Result{Scenario: "partition", Seed: p.Seed, Params: p}
		r.fail("%v", err)
		return r
	}
	defer proxy.Close()
	return run(ctx, env, "partition", p, env.Endpoint, func(ctx context.Context, f *fixture) error {
		f.watch()
		// The victim's handlers take a while, so some are in flight when it is cut off.
		slow := []string{"--endpoint", proxy.URL(), "--exec", "sleep 0.2; " + f.handler()}
		if err := f.startFleetWith(ctx, slow); err != nil {
			return err
		}
		victim := f.procs[0]
		if ok, err := f.waitCompleted(ctx, f.thresholds(1, 0.15, 0.5)[0]); err != nil || !ok {
			return err
		}
		l := victim.Last()
		if l.Slot < 0 || l.State != "working" {
			f.res.event("%s no longer works a slot (%s) at %d/%d done: nothing to cut", victim.Owner, l.State, f.completed(), f.p.Items)
			return nil
		}
		victim.Fault()
		f.countLeaseLosses(f.p.Concurrency)
		pw := &partitionWrites{owner: victim.Owner, slot: int64(l.Slot), token: l.Token, leases: f.leases}
		proxy.Cut(true)
		cutAt := time.Now()
		linesAtCut := len(victim.Lines())
		f.res.SideEffectBound += f.p.Concurrency
		f.res.event("%s (slot %d, token %d) cut off DynamoDB at %d/%d done", victim.Owner, l.Slot, l.Token, f.completed(), f.p.Items)
		if err := f.watcher.WaitToken(ctx, l.Slot, l.Token); err != nil {
			return err
		}
		f.res.event("slot %d taken over with token %d after %s", l.Slot, f.watcher.Token(l.Slot), time.Since(cutAt).Round(time.Millisecond))
		select {
		case <-time.After(time.Duration(500+f.rng.IntN(1500)) * time.Millisecond):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		proxy.Observe(pw.observe)
		proxy.Cut(false)
		f.res.event("%s reconnected after %s; %d requests were held and reset while cut off", victim.Owner,
			time.Since(cutAt).Round(time.Millisecond), cutCount(proxy.Counts()))
		f.audits = append(f.audits, pw.check)
		if _, err := victim.WaitLine(ctx, linesAtCut, func(x progress.Line) bool { return x.Event == "lease-lost" }); err != nil {
			f.res.fail("the reconnected worker never reported its lease lost: %v", err)
		}
		return nil
	})
}

func cutCount(m map[string]int) int {
	n := 0
	for k, v := range m {
		if strings.HasPrefix(k, "cut ") {
			n += v
		}
	}
	return n
}

// partitionWrites classifies the reconnected worker's writes.
type partitionWrites struct {
	owner  string
	slot   int64
	token  int64
	leases string

	mu              sync.Mutex
	fencedLease     map[string]int // refused lease writes fenced by the old token, by operation
	fencedClaim     map[string]int // refused claim writes fenced by the old claim, by operation
	other           map[string]int // writes not fenced by the old lease (a later lease of its own), by outcome
	landed          []string       // fenced writes that DynamoDB applied: violations
	unclassifiedErr []string
}

// request is the part of a DynamoDB JSON request the classification reads.
type request struct {
	TableName                 string
	UpdateExpression          string
	Key                       map[string]map[string]any
	ExpressionAttributeValues map[string]map[string]any
	TransactItems             []map[string]request
}

// describe names a write by its operation, keys and update expressions.
func describe(op string, parts []request) string {
	var b strings.Builder
	b.WriteString(op)
	for _, r := range parts {
		key, _ := json.Marshal(r.Key)
		fmt.Fprintf(&b, " [%s %s: %s]", r.TableName, key, r.UpdateExpression)
	}
	return b.String()
}

// attr is an attribute value's typ ("S", "N") member, "" when absent or of another type.
func attr(m map[string]map[string]any, name, typ string) string {
	s, _ := m[name][typ].(string)
	return s
}

func (pw *partitionWrites) observe(x Exchange) {
	switch x.Op {
	case "UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
	default:
		return
	}
	var rq request
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.fencedLease == nil {
		pw.fencedLease, pw.fencedClaim, pw.other = map[string]int{}, map[string]int{}, map[string]int{}
	}
	if err := json.Unmarshal(x.Req, &rq); err != nil {
		pw.unclassifiedErr = append(pw.unclassifiedErr, fmt.Sprintf("%s: %v", x.Op, err))
		return
	}
	parts := []request{rq}
	if len(rq.TransactItems) > 0 {
		parts = parts[:0]
		for _, ti := range rq.TransactItems {
			for _, r := range ti {
				parts = append(parts, r)
			}
		}
	}
	lease, claim := false, false
	for _, r := range parts {
		lease = lease || pw.leaseFenced(r)
		claim = claim || pw.claimFenced(r)
	}
	refused := x.Status == 400 && (strings.Contains(string(x.Resp), "ConditionalCheckFailed") || strings.Contains(string(x.Resp), "TransactionCanceled"))
	switch {
	case (lease || claim) && x.Status == 200:
		pw.landed = append(pw.landed, fmt.Sprintf("SDK attempt %s: %s", x.Attempt, describe(x.Op, parts)))
	case lease && refused:
		pw.fencedLease[x.Op]++
	case claim && refused:
		pw.fencedClaim[x.Op]++
	case lease || claim:
		pw.other[fmt.Sprintf("fenced %s answered %d", x.Op, x.Status)]++
	case x.Status == 200:
		pw.other[x.Op+" applied"]++
	default:
		pw.other[x.Op+" refused"]++
	}
}

// leaseFenced: a write to the old slot item that requires the old token (not an acquisition,
// which names the token it replaces as :oldToken).
func (pw *partitionWrites) leaseFenced(r request) bool {
	if r.TableName != pw.leases || attr(r.Key, "sk", "N") != strconv.FormatInt(pw.slot, 10) {
		return false
	}
	v := r.ExpressionAttributeValues
	tok := strconv.FormatInt(pw.token, 10)
	return attr(v, ":myToken", "N") == tok || (attr(v, ":token", "N") == tok && v[":acq"] == nil)
}

// claimFenced: a ledger write made under the old lease (owner, slot and token of its claims).
func (pw *partitionWrites) claimFenced(r request) bool {
	if r.TableName == pw.leases {
		return false
	}
	v := r.ExpressionAttributeValues
	return attr(v, ":owner", "S") == pw.owner && attr(v, ":slot", "N") == strconv.FormatInt(pw.slot, 10) &&
		attr(v, ":token", "N") == strconv.FormatInt(pw.token, 10)
}

// check adds the counts to the result: every write fenced by the old lease must have been refused.
func (pw *partitionWrites) check(r *Result, _ *audit) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	r.event("after the reconnect %s sent: refused lease writes fenced by token %d: %v; refused claim writes of that lease: %v; other writes: %v",
		pw.owner, pw.token, pw.fencedLease, pw.fencedClaim, pw.other)
	for _, l := range pw.landed {
		r.fail("a write of %s fenced by its lost lease (slot %d, token %d) was applied after the reconnect: %.400s", pw.owner, pw.slot, pw.token, l)
	}
	for _, e := range pw.unclassifiedErr {
		r.fail("could not read a request of %s: %s", pw.owner, e)
	}
	if len(pw.other) > 0 {
		for k := range pw.other {
			if strings.HasPrefix(k, "fenced ") {
				r.fail("a write of %s fenced by its lost lease got an answer other than refusal: %s", pw.owner, k)
			}
		}
	}
}
