package ledger

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"pgregory.net/rapid"

	"github.com/dynapart/dynapart/ddbfault"
)

// Effect-carrying commits in the model-based test: a completion (fenced, or complete-only) may
// carry an update of the item (n + 1), an update of a shared counter on another table, and a
// put-if-absent of the item's "once" row there. The model keeps each item's n, the counter and
// which once rows exist; check compares them with the tables after every step. Effects apply
// exactly when the completion does: a lost claim, a live claim or a failed put-if-absent applies
// none of them.

// mcEffects says what a commit carries.
type mcEffects struct {
	item, counter, once bool
}

var mcEffectChoices = []mcEffects{{item: true}, {item: true, counter: true}, {counter: true}, {item: true, counter: true, once: true}}

// effectsState is the model's view of the effects' tables.
type effectsState struct {
	n       []int  // per item: its n attribute (0: missing)
	counter int    // the shared counter
	rows    []bool // per item: its once row exists
}

func (m *modelRun) counterKey() Key { return otherKey(fmt.Sprintf("s%d-counter", m.run)) }
func (m *modelRun) onceKey(i int) Key {
	return otherKey(fmt.Sprintf("s%d-once-%d", m.run, i))
}

// effectsFor builds the effects of a commit of item i.
func (m *modelRun) effectsFor(i int, x mcEffects) *Effects {
	e := &Effects{}
	if x.item {
		e.Item(Add("n", 1))
	}
	if x.counter {
		e.Update(m.e.other, m.counterKey(), Add("n", 1))
	}
	if x.once {
		e.PutIfAbsent(m.e.other, m.onceKey(i))
	}
	return e
}

// applyEffects applies x to the model for item i: false when the once row exists (the commit is
// refused).
func (m *modelRun) applyEffects(i int, x mcEffects) {
	if x.item {
		m.fx.n[i]++
	}
	if x.counter {
		m.fx.counter++
	}
	if x.once {
		m.fx.rows[i] = true
	}
}

// viaTx reports whether a commit of x goes through a transaction (else the completion's own
// UpdateItem carries it).
func (m *modelRun) viaTx(x mcEffects) bool { return x.counter || x.once || m.e.kind == "table" }

// armCommit arms a fault on the commit's first write: a transaction is resent until it lands (the
// same token), so its outcome is the fault-free one.
func (m *modelRun) armCommit(t *rapid.T) ddbfault.Kind {
	k := rapid.SampledFrom(mcFaults).Draw(t, "fault")
	m.e.fc.Disarm()
	if k != "" {
		m.e.fc.Inject(ddbfault.Fault{Kind: k, At: 1, Ops: []string{ddbfault.OpUpdateItem, ddbfault.OpTransactWriteItems}})
	}
	return k
}

// completeWith completes a held claim with effects, under a drawn fault.
func (m *modelRun) completeWith(t *rapid.T) {
	if len(m.held) == 0 {
		t.Skip("no claim held")
	}
	j := rapid.IntRange(0, len(m.held)-1).Draw(t, "claim")
	h := &m.held[j]
	if h.commit == nil {
		h.commit = &mcCommit{x: rapid.SampledFrom(mcEffectChoices).Draw(t, "effects"), now: m.now.Add(h.offset)}
	}
	x, i, now := h.commit.x, h.item, h.commit.now
	fault := m.armCommit(t)
	if m.viaTx(x) {
		fault = "" // resent until it lands: as if no fault
	}
	err := m.e.l.CompleteWith(ctxT(), h.c, now, m.effectsFor(i, x))
	m.e.fc.Disarm()
	if h.commit.landed {
		// A repeat of a commit that landed: DynamoDB answers the same token as the first time
		// (nil), or the completion, meeting a state since changed, reports the claim lost (or,
		// sent as the completion's own write under a fault, that its outcome is unknown).
		if err != nil && !errorsIsLost(err) && fault == "" {
			t.Fatalf("repeat of a landed commit of item %d: %v", i, err)
		}
		return
	}
	if notSent(fault) {
		if err == nil && !m.items[i].showsFenced(OpComplete, h.c.ID) {
			t.Fatalf("complete of item %d under %s: no error", i, fault)
		}
		return
	}
	before := m.items[i]
	current := before.exists && before.status == StatusClaimed && before.claim == h.c.ID
	if current && x.once && m.fx.rows[i] {
		if !errorsIsRefused(err) {
			t.Fatalf("complete of item %d with a put-if-absent of an existing row: got %v, want the effect refused", i, err)
		}
		return
	}
	lost := m.items[i].fenced(OpComplete, h.c.ID, now.UnixMilli(), 0)
	if current {
		m.applyEffects(i, x)
		h.commit.landed = true
	}
	m.settleDone(i, current, err)
	switch {
	case sendLost(fault) && lost:
		if err == nil {
			t.Fatalf("complete of item %d: its answer was lost and the write did not land, yet no error", i)
		}
	case lost && !errorsIsLost(err), !lost && err != nil:
		t.Fatalf("complete with effects of item %d (claim %s): got %v, model says lost=%v", i, h.c.ID, err, lost)
	}
}

// completeOnlyWith completes an item without a claim, with effects, under a drawn fault.
func (m *modelRun) completeOnlyWith(t *rapid.T) {
	a, i := m.pick(t)
	req, mr := m.request(t, a, i, rapid.Bool().Draw(t, "fresh"))
	x := rapid.SampledFrom(mcEffectChoices).Draw(t, "effects")
	fault := m.armCommit(t)
	if m.viaTx(x) {
		fault = ""
	}
	res, err := m.e.l.CompleteOnlyWith(ctxT(), req, m.effectsFor(i, x))
	m.e.fc.Disarm()
	if m.skipUnsent(t, "complete-only", i, req, mr, fault, err) {
		return
	}
	probe := m.items[i]
	if probe.completeOnly(mr) && x.once && m.fx.rows[i] {
		if !errorsIsRefused(err) {
			t.Fatalf("complete-only of item %d with a put-if-absent of an existing row: got %v, want the effect refused", i, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("complete-only with effects of item %d under fault %q: %v", i, fault, err)
	}
	applied := m.items[i].completeOnly(mr)
	if res.Applied != applied {
		t.Fatalf("complete-only with effects of item %d: applied=%v, model says %v (found %q)", i, res.Applied, applied, res.Found.Status)
	}
	if applied {
		m.applyEffects(i, x)
	}
	m.settleDone(i, applied, nil)
}

// checkEffects compares the effects' tables with the model.
func (m *modelRun) checkEffects(t *rapid.T) {
	if got := m.numberOf(t, m.e.other, m.counterKey()); got != m.fx.counter {
		t.Fatalf("the shared counter is %d, model %d", got, m.fx.counter)
	}
	for i := range mcItems {
		if got := m.numberOf(t, m.e.source, m.keys[i]); got != m.fx.n[i] {
			t.Fatalf("item %d: n is %d, model %d", i, got, m.fx.n[i])
		}
		if got := m.exists(t, m.e.other, m.onceKey(i)); got != m.fx.rows[i] {
			t.Fatalf("item %d: once row exists=%v, model %v", i, got, m.fx.rows[i])
		}
	}
}

func (m *modelRun) read(t *rapid.T, table string, key Key) map[string]types.AttributeValue {
	out, err := m.e.raw.GetItem(ctxT(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	return out.Item
}

func (m *modelRun) numberOf(t *rapid.T, table string, key Key) int {
	n := 0
	if v, ok := m.read(t, table, key)["n"].(*types.AttributeValueMemberN); ok {
		_, _ = fmt.Sscan(v.Value, &n)
	}
	return n
}

func (m *modelRun) exists(t *rapid.T, table string, key Key) bool {
	return m.read(t, table, key) != nil
}

// effectsOnWipe: an inline item rewritten or deleted loses its n.
func (m *modelRun) effectsOnWipe(i int) {
	if m.e.kind == "inline" {
		m.fx.n[i] = 0
	}
}
