package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"pgregory.net/rapid"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// The model-based test: random sequences of ledger operations (claims single and batched, fresh
// and general, completions single and batched, retries, dead letters, releases, abandons,
// complete-only writes and failures, redrives) by several workers of two groups, with stale lease
// tokens and clocks skewed within the ledger's MaxClockSkew, mixed with another client's resets,
// rewrites and deletes and with lost and delayed answers (ddbfault), run against each ledger on DynamoDB Local
// and moto. After every step each outcome and every item's stored state must equal the reference
// model's (model_test.go), and three properties must hold: callers are told an item is done at most
// once per generation (and exactly once when no write of unknown outcome could have done it), a
// claim is taken over by expiry only after its holder's deadline, and nothing else changed.
// rapid shrinks a failure to a shortest sequence and prints the seed that replays it.

const (
	mcTTL  = 10 * time.Second
	mcSkew = 2 * time.Second
	// mcItems is the number of items a sequence works on: few, so that operations meet.
	mcItems = 3
)

// mcT0 is the sequences' time origin.
var mcT0 = time.UnixMilli(1_800_000_000_000)

// modelEnv is one ledger on one backend: its tables, the fault-injecting client the ledger uses,
// and the raw client another writer (and the checks) use.
type modelEnv struct {
	kind        string // "inline" or "table"
	raw         *dynamodb.Client
	fc          *ddbfault.Client
	l           Ledger
	core        *core
	source      string
	ledgerTable string
	other       string       // the effects' other table (key pk S)
	nonce       string       // in every claim id: ids are unique across test runs (DynamoDB keeps commit tokens 10 minutes)
	seq         atomic.Int64 // sequences run: each works on its own keys
	steps       atomic.Int64
	// mutate changes the ledger's machine before the sequences run (a hole put back).
	mutate func(*core)
}

func newModelEnv(t *testing.T, kind string, mutate func(*core)) *modelEnv {
	db, source, names := lcSourceTable(t)
	e := &modelEnv{kind: kind, raw: db, fc: ddbfault.New(db, ddbfault.WithTimeout(20*time.Millisecond)), source: source, mutate: mutate,
		other: ddbtest.CreateTable(t, db, ddbtest.Key{Name: "pk", Type: "S"}), nonce: newID()[:8]}
	var err error
	switch kind {
	case "inline":
		var l *Inline
		l, err = NewInline(e.fc, source, names, lcOpts(t, WithMaxClockSkew(mcSkew), WithVersions())...)
		if err == nil {
			e.l, e.core = l, l.core
		}
	default:
		e.ledgerTable = lcLedgerTable(t, db)
		var l *Table
		l, err = NewTable(e.fc, e.ledgerTable, "job", source, names, lcOpts(t, WithMaxClockSkew(mcSkew), WithVersions())...)
		if err == nil {
			e.l, e.core = l, l.core
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(e.core)
	}
	return e
}

// mcActor is a worker: its group (scope), slot, and its clock's offset from the global clock.
type mcActor struct {
	owner  string
	scope  string
	slot   int
	offset time.Duration
}

// mcHeld is a claim a caller was given, kept (also once lost) to make stale writes with.
type mcHeld struct {
	c      Claim
	item   int
	offset time.Duration
	// commit is the claim's first commit with effects: a repeat sends the same (a claim commits
	// once; a repeat must be the same request).
	commit *mcCommit
}

type mcCommit struct {
	x      mcEffects
	now    time.Time
	landed bool // it applied once: a repeat applies nothing and is told so, or that its claim is lost
}

// modelRun is one sequence: the model's items, the global clock, the workers and the claims held.
type modelRun struct {
	e       *modelEnv
	run     int64 // the sequence's number: its keys and rows are its own
	fx      effectsState
	keys    []Key
	items   []mItem
	now     time.Time
	tokens  map[string]int64 // scope/slot -> the slot's latest lease token
	actors  []mcActor
	held    []mcHeld
	ids     int
	told    []int  // per item: callers told it was done in this generation
	unknown []bool // per item: a write of unknown outcome may have done it in this generation
	// deadlineOf is, per item, the global time its current claim's holder must be done by (zero
	// when not claimed); a takeover by expiry must come after it.
	deadlineOf []time.Time
}

func (e *modelEnv) newRun(t *rapid.T) *modelRun {
	n := e.seq.Add(1)
	m := &modelRun{e: e, run: n, fx: effectsState{n: make([]int, mcItems), rows: make([]bool, mcItems)}, now: mcT0, tokens: map[string]int64{}, items: make([]mItem, mcItems), told: make([]int, mcItems),
		unknown: make([]bool, mcItems), deadlineOf: make([]time.Time, mcItems)}
	for i := range mcItems {
		m.keys = append(m.keys, Key{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("s%d-k%d", n, i)}})
		m.items[i] = mItem{exists: true}
		m.put(t, i)
	}
	offsets := []time.Duration{-mcSkew / 2, 0, mcSkew / 2}
	for g, scope := range []string{"gA", "gB"} {
		for slot := range 2 {
			m.actors = append(m.actors, mcActor{owner: fmt.Sprintf("w%d%d", g, slot), scope: scope, slot: slot,
				offset: offsets[rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("offset-%s-%d", scope, slot))]})
			m.tokens[scope+"/"+strconv.Itoa(slot)] = 1
		}
	}
	return m
}

// request is actor a's request on item i, with a fresh id and a token of its slot (the latest,
// or an older one: a stale worker).
func (m *modelRun) request(t *rapid.T, a mcActor, i int, fresh bool) (ClaimRequest, mReq) {
	latest := m.tokens[a.scope+"/"+strconv.Itoa(a.slot)]
	token := rapid.Int64Range(max(1, latest-1), latest).Draw(t, "token")
	m.ids++
	now := m.now.Add(a.offset)
	r := ClaimRequest{Key: m.keys[i], ID: fmt.Sprintf("%s-s%d-id-%d", m.e.nonce, m.run, m.ids), Owner: a.owner, Slot: a.slot, Token: token,
		Scope: a.scope, Now: now, Until: now.Add(mcTTL), Fresh: fresh}
	// The claim id of the state the caller judged the item by: as it is, an older one, or none.
	r.Seen = rapid.SampledFrom([]string{m.items[i].claim, "stale-" + newID(), ""}).Draw(t, "seen")
	return r, mReq{id: r.ID, owner: a.owner, slot: a.slot, token: token, scope: a.scope, now: now.UnixMilli(),
		until: r.Until.Add(mcSkew).UnixMilli(), fresh: fresh, prev: seenOrOwn(r)}
}

// mcFaults are the faults a single write may meet, most often none.
var mcFaults = []ddbfault.Kind{"", "", "", "", ddbfault.LostAnswer, ddbfault.LostAnswerRetried,
	ddbfault.LostAnswerRetriedNoOld, ddbfault.ErrorBeforeSend, ddbfault.Throttle, ddbfault.DelayedAnswer}

// arm draws a fault for the next single write and arms it on the ledger's client. It returns the
// fault as the outcome sees it: throttling is retried by the ledger until the write goes through,
// so its outcome is the fault-free one ("").
func (m *modelRun) arm(t *rapid.T) ddbfault.Kind {
	k := rapid.SampledFrom(mcFaults).Draw(t, "fault")
	m.e.fc.Disarm()
	if k != "" {
		m.e.fc.Inject(ddbfault.Fault{Kind: k, At: 1, Ops: []string{ddbfault.OpUpdateItem}})
	}
	if k == ddbfault.Throttle {
		return ""
	}
	return k
}

// sendLost reports a fault after which the caller learns nothing of its write (a delayed answer
// comes after the client's timeout).
func sendLost(k ddbfault.Kind) bool { return k == ddbfault.LostAnswer || k == ddbfault.DelayedAnswer }

// notSent reports a fault that keeps the write from landing (and is not retried).
func notSent(k ddbfault.Kind) bool { return k == ddbfault.ErrorBeforeSend }

func ctxT() context.Context { return context.Background() }

// mcFlags sets rapid's check count and average steps unless the command line did (read once,
// before any test sets them: flag.Visit also lists flags set by flag.Set).
func mcFlags(checks, steps int) {
	mcUserFlagsOnce.Do(func() {
		flag.Visit(func(f *flag.Flag) { mcUserFlags[f.Name] = true })
	})
	set := func(name, v string) {
		if !mcUserFlags[name] {
			_ = flag.Set(name, v)
		}
	}
	set("rapid.checks", strconv.Itoa(checks))
	set("rapid.steps", strconv.Itoa(steps))
	// The seed a failure prints replays it; a fail file would be written into the source tree.
	set("rapid.nofailfile", "true")
}

var (
	mcUserFlagsOnce sync.Once
	mcUserFlags     = map[string]bool{}
)

// rawRow reads item i's state row with the raw client (consistent); nil when it has none.
func (m *modelRun) rawRow(t *rapid.T, i int) map[string]types.AttributeValue {
	table, key := m.e.source, m.keys[i]
	if m.e.kind == "table" {
		rk, err := m.e.core.row.key(key)
		if err != nil {
			t.Fatal(err)
		}
		table, key = m.e.ledgerTable, rk
	}
	out, err := m.e.raw.GetItem(ctxT(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("read item %d: %v", i, err)
	}
	return out.Item
}

// errorsIsLost reports a *ClaimLostError.
func errorsIsLost(err error) bool { return errors.Is(err, ErrClaimLost) }

// check compares every item's stored state with the model's and checks what callers were told.
func (m *modelRun) check(t *rapid.T) {
	m.e.steps.Add(1)
	for i := range mcItems {
		row := m.rawRow(t, i)
		want := m.items[i]
		if m.e.kind == "inline" && (row != nil) != want.exists {
			t.Fatalf("item %d: exists=%v, model says %v", i, row != nil, want.exists)
		}
		if diff := stateDiff(m.e.core.decodeState(row), want); diff != "" {
			t.Fatalf("item %d: %s (model: %+v)", i, diff, want)
		}
		if want.status != StatusClaimed {
			m.deadlineOf[i] = time.Time{}
		}
		switch {
		case m.told[i] > 1:
			t.Fatalf("item %d: callers were told %d times that they completed it (generation since its last reset)", i, m.told[i])
		case want.status == StatusDone && m.told[i] == 0 && !m.unknown[i]:
			t.Fatalf("item %d is done, but no caller was told it completed it", i)
		}
	}
	m.checkEffects(t)
}

// stateDiff says how a stored state differs from the model's, "" when it does not.
func stateDiff(got ItemState, want mItem) string {
	var d []string
	add := func(name string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s %v, model %v", name, g, w))
		}
	}
	add("status", got.Status, want.status)
	add("claim", got.Claim, want.claim)
	add("attempts", got.Attempts, want.attempts)
	switch want.status {
	case StatusClaimed:
		add("owner", got.Owner, want.owner)
		add("slot", got.Slot, want.slot)
		add("token", got.Token, want.token)
		add("scope", got.Scope, want.scope)
		add("claim_until", got.ClaimUntil.UnixMilli(), want.claimUntil)
	case StatusRetry:
		add("retry_at", msOf(got.RetryAt), want.retryAt)
	}
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprint(d)
}

func msOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// property is one sequence.
func (e *modelEnv) property(t *rapid.T) {
	m := e.newRun(t)
	t.Repeat(m.actions())
}

// TestLedgerModel runs the model-based test on both ledgers and every backend. make test runs a
// short version (a few hundred steps per ledger and backend); make chaos a long one
// (-rapid.checks, -rapid.steps); -rapid.seed replays a failure.
func TestLedgerModel(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, b ddbtest.Backend) {
		checks := 15
		if b.Name == "moto" {
			checks = 3 // moto's server answers an order of magnitude slower, and takes CPU from the rest of make test
		}
		mcFlags(checks, 40)
		for _, kind := range []string{"inline", "table"} {
			t.Run(kind, func(t *testing.T) {
				e := newModelEnv(t, kind, nil)
				t.Cleanup(func() { e.report(t, b.Name) })
				rapid.Check(t, e.property)
				t.Logf("%d sequences, %d steps checked", e.seq.Load(), e.steps.Load())
			})
		}
	})
}

// ModelReportEnv names a file the model-based test appends one JSON line per ledger and backend
// to (make chaos writes RELIABILITY.md from it).
const ModelReportEnv = "DYNAPART_MODEL_REPORT"

// report appends this run's figures to $DYNAPART_MODEL_REPORT, when set.
func (e *modelEnv) report(t *testing.T, backend string) {
	path := os.Getenv(ModelReportEnv)
	if path == "" {
		return
	}
	seed := ""
	if f := flag.Lookup("rapid.seed"); f != nil {
		seed = f.Value.String()
	}
	line, err := json.Marshal(map[string]any{"backend": backend, "ledger": e.kind, "sequences": e.seq.Load(),
		"steps": e.steps.Load(), "failed": t.Failed(), "seed": seed, "checks": flag.Lookup("rapid.checks").Value.String(),
		"avg_steps": flag.Lookup("rapid.steps").Value.String()})
	if err != nil {
		t.Error(err)
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(line, '\n'))
}

// errorsIsRefused reports an *EffectError.
func errorsIsRefused(err error) bool { return errors.Is(err, ErrEffectRefused) }
