package ledger

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"pgregory.net/rapid"

	"github.com/dynapart/dynapart/ddbfault"
)

// The actions of a sequence: each runs one operation on the ledger (or as another client) and
// applies the same operation to the model; check (modelcheck_test.go) then compares.

func (m *modelRun) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"tick":          m.tick,
		"takeover":      m.takeover,
		"claim":         m.claimOne,
		"claimBatch":    m.claimBatch,
		"fenced":        m.fencedOp,
		"completeBatch": m.completeBatch,
		"completeOnly":  m.completeOnlyOp,
		"completeWith":  m.completeWith,
		"onlyWith":      m.completeOnlyWith,
		"failOnly":      m.failOnlyOp,
		"redrive":       m.redriveOp,
		"renew":         m.renewOp,
		"external":      m.external,
		"":              m.check,
	}
}

// tick moves the global clock on, by up to two claim TTLs.
func (m *modelRun) tick(t *rapid.T) {
	m.now = m.now.Add(time.Duration(rapid.Int64Range(0, int64(2*mcTTL/time.Millisecond)).Draw(t, "ms")) * time.Millisecond)
}

// takeover gives a slot of a group a new lease token (its old holder is now stale).
func (m *modelRun) takeover(t *rapid.T) {
	a := rapid.SampledFrom(m.actors).Draw(t, "actor")
	m.tokens[a.scope+fmt.Sprintf("/%d", a.slot)]++
}

func (m *modelRun) pick(t *rapid.T) (mcActor, int) {
	return rapid.SampledFrom(m.actors).Draw(t, "actor"), rapid.IntRange(0, mcItems-1).Draw(t, "item")
}

// claimOne claims one item (UpdateItem), under a drawn fault.
func (m *modelRun) claimOne(t *rapid.T) {
	a, i := m.pick(t)
	req, mr := m.request(t, a, i, rapid.Bool().Draw(t, "fresh"))
	fault := m.arm(t)
	outs, err := m.e.l.Claim(ctxT(), []ClaimRequest{req})
	m.e.fc.Disarm()
	before := m.items[i]
	first := before.stateless()
	if !req.Fresh {
		first = before.claimable(mr)
	}
	switch {
	case notSent(fault) || sendLost(fault) && !first:
		if err == nil {
			t.Fatalf("claim of item %d under %s: no error, want one (%+v)", i, fault, outs[0])
		}
		return
	case err != nil:
		t.Fatalf("claim of item %d under fault %q: %v", i, fault, err)
	}
	want := m.items[i].claimWith(mr)
	m.checkClaim(t, i, a, req, before, want, outs[0])
}

// checkClaim compares a claim's outcome with the model's and records the claim.
func (m *modelRun) checkClaim(t *rapid.T, i int, a mcActor, req ClaimRequest, before mItem, want mClaimOutcome, got ClaimOutcome) {
	if got.Claimed != want.claimed || got.Claimed && got.Claim.Attempt != want.attempt || !got.Claimed && got.Found.Status != want.found {
		t.Fatalf("claim of item %d by %s: got claimed=%v attempt %d found %q, model says claimed=%v attempt %d found %q (item was %+v)",
			i, a.owner, got.Claimed, got.Claim.Attempt, got.Found.Status, want.claimed, want.attempt, want.found, before)
	}
	if !got.Claimed {
		return
	}
	if got.Claim.ID != req.ID {
		t.Fatalf("claim of item %d: id %q, want the request's %q", i, got.Claim.ID, req.ID)
	}
	m.tookOver(t, i, before, req)
	m.held = append(m.held, mcHeld{c: got.Claim, item: i, offset: a.offset})
	m.deadlineOf[i] = deadline(req.Until, a.offset)
}

// tookOver checks that a claim that took a live claim over by its expiry came after the old
// holder's deadline, by the global clock: clocks skewed within MaxClockSkew never let two
// handlers of one item overlap.
func (m *modelRun) tookOver(t *rapid.T, i int, before mItem, req ClaimRequest) {
	if before.status != StatusClaimed || before.claim == req.ID {
		return
	}
	newer := before.slot == req.Slot && before.token < req.Token && before.scope != "" && before.scope == req.Scope
	if !newer && m.now.Before(m.deadlineOf[i]) {
		t.Fatalf("item %d taken over by expiry at %s, before its holder's deadline %s (global clock)",
			i, m.now.Sub(mcT0), m.deadlineOf[i].Sub(mcT0))
	}
}

// claimBatch claims two or three items (a key may repeat) in one call, without faults.
func (m *modelRun) claimBatch(t *rapid.T) {
	a := rapid.SampledFrom(m.actors).Draw(t, "actor")
	n := rapid.IntRange(2, 3).Draw(t, "n")
	reqs := make([]ClaimRequest, n)
	mrs := make([]mReq, n)
	idx := make([]int, n)
	for j := range n {
		idx[j] = rapid.IntRange(0, mcItems-1).Draw(t, "item")
		reqs[j], mrs[j] = m.request(t, a, idx[j], rapid.Bool().Draw(t, "fresh"))
	}
	outs, err := m.e.l.Claim(ctxT(), reqs)
	if err != nil {
		t.Fatalf("batch claim: %v", err)
	}
	seen := map[int]int{}
	for j, i := range idx {
		before := m.items[i]
		if first, dup := seen[i]; dup {
			// A key asked for twice is claimed once; the repeat reports it claimed or as found.
			if outs[j].Claimed || outs[first].Claimed && outs[j].Found.Status != StatusClaimed {
				t.Fatalf("batch claim: repeated item %d: %+v", i, outs[j])
			}
			continue
		}
		seen[i] = j
		m.checkClaim(t, i, a, reqs[j], before, m.items[i].claimWith(mrs[j]), outs[j])
	}
}

// fencedOps are the transitions of a held claim.
var fencedOps = []Op{OpComplete, OpRetry, OpDeadLetter, OpRelease, OpAbandon}

// fencedOp sends a transition of a held claim (current or stale), under a drawn fault.
func (m *modelRun) fencedOp(t *rapid.T) {
	if len(m.held) == 0 {
		t.Skip("no claim held")
	}
	h := rapid.SampledFrom(m.held).Draw(t, "claim")
	op := rapid.SampledFrom(fencedOps).Draw(t, "op")
	now := m.now.Add(h.offset)
	retryAt := now.Add(time.Duration(rapid.IntRange(0, 20).Draw(t, "retry s")) * time.Second)
	if op == OpRelease {
		retryAt = now.Add(-m.e.core.skew) // a release is due at once by every clock within the skew
	}
	fault := m.arm(t)
	err := m.sendFenced(op, h.c, now, retryAt)
	m.e.fc.Disarm()
	i := h.item
	if notSent(fault) {
		// Not sent: an error, unless the settling read finds this claim's own earlier write.
		if err == nil && !m.items[i].showsFenced(op, h.c.ID) {
			t.Fatalf("%s of item %d under %s: no error", op, i, fault)
		}
		return
	}
	before := m.items[i]
	current := before.exists && before.status == StatusClaimed && before.claim == h.c.ID
	lost := m.items[i].fenced(op, h.c.ID, now.UnixMilli(), retryAt.UnixMilli())
	m.settleDone(i, op == OpComplete && current, err)
	switch {
	case sendLost(fault) && lost:
		// The answer was lost and the row does not show the write: an outcome the read cannot
		// settle (the write may still be in flight), or the claim found lost.
		if err == nil {
			t.Fatalf("%s of item %d: its answer was lost and the write did not land, yet no error", op, i)
		}
	case lost && !errorsIsLost(err), !lost && err != nil:
		t.Fatalf("%s of item %d (claim %s): got %v, model says lost=%v", op, i, h.c.ID, err, lost)
	}
	if m.items[i].status != StatusClaimed {
		m.deadlineOf[i] = time.Time{}
	}
}

func (m *modelRun) sendFenced(op Op, c Claim, now, retryAt time.Time) error {
	switch op {
	case OpComplete:
		return m.e.l.Complete(ctxT(), c, now)
	case OpRetry:
		return m.e.l.Retry(ctxT(), c, "boom", retryAt)
	case OpDeadLetter:
		return m.e.l.DeadLetter(ctxT(), c, "bad", now)
	case OpRelease:
		return m.e.l.Release(ctxT(), c, now)
	}
	return m.e.l.Abandon(ctxT(), c)
}

// settleDone counts what a caller was told of a write that may have moved item i to done.
func (m *modelRun) settleDone(i int, didDone bool, err error) {
	switch {
	case didDone && err == nil:
		m.told[i]++
	case didDone:
		m.unknown[i] = true
	}
}

// completeBatch completes some held claims in one call, without faults.
func (m *modelRun) completeBatch(t *rapid.T) {
	if len(m.held) < 2 {
		t.Skip("fewer than two claims held")
	}
	hs := []mcHeld{rapid.SampledFrom(m.held).Draw(t, "a"), rapid.SampledFrom(m.held).Draw(t, "b")}
	if hs[0].item == hs[1].item {
		hs = hs[:1]
	}
	claims := make([]Claim, len(hs))
	for j, h := range hs {
		claims[j] = h.c
	}
	errs := m.e.l.CompleteBatch(ctxT(), claims, m.now)
	for j, h := range hs {
		before := m.items[h.item]
		current := before.exists && before.status == StatusClaimed && before.claim == h.c.ID
		lost := m.items[h.item].fenced(OpComplete, h.c.ID, m.now.UnixMilli(), 0)
		if lost != errorsIsLost(errs[j]) || !lost && errs[j] != nil {
			t.Fatalf("batch complete of item %d: got %v, model says lost=%v", h.item, errs[j], lost)
		}
		m.settleDone(h.item, current, errs[j])
	}
}

// completeOnlyOp completes an item without a claim, under a drawn fault.
func (m *modelRun) completeOnlyOp(t *rapid.T) {
	a, i := m.pick(t)
	req, mr := m.request(t, a, i, rapid.Bool().Draw(t, "fresh"))
	fault := m.arm(t)
	res, err := m.e.l.CompleteOnly(ctxT(), req)
	m.e.fc.Disarm()
	if m.skipUnsent(t, "complete-only", i, req, mr, fault, err) {
		return
	}
	if err != nil {
		t.Fatalf("complete-only of item %d under fault %q: %v", i, fault, err)
	}
	applied := m.items[i].completeOnly(mr)
	if res.Applied != applied {
		t.Fatalf("complete-only of item %d: applied=%v, model says %v (found %q)", i, res.Applied, applied, res.Found.Status)
	}
	m.settleDone(i, applied, nil)
}

// skipUnsent handles a write that did not land (a fault before sending) or whose first request
// could not land and whose answer was lost: an error, and nothing changed.
func (m *modelRun) skipUnsent(t *rapid.T, what string, i int, req ClaimRequest, mr mReq, fault ddbfault.Kind, err error) bool {
	it := m.items[i]
	first := it.completeOnlyCond(mr) // the first request's condition: OpCompleteOnly, OpFailOnly
	if req.Fresh {
		first = first && it.stateless() // as completeOnly: a versioned ledger's fresh write is fenced on seen too
	}
	if !notSent(fault) && !(sendLost(fault) && !first) {
		return false
	}
	if err == nil {
		t.Fatalf("%s of item %d under %s: no error", what, i, fault)
	}
	return true
}

// failOnlyOp records a failed complete-only attempt, under a drawn fault.
func (m *modelRun) failOnlyOp(t *rapid.T) {
	a, i := m.pick(t)
	req, mr := m.request(t, a, i, false)
	mr.permanent = rapid.Bool().Draw(t, "permanent")
	mr.maxAttempts = rapid.IntRange(1, 3).Draw(t, "max")
	mr.retryAt = m.now.Add(5 * time.Second).UnixMilli()
	f := Failure{Error: "boom", RetryAt: time.UnixMilli(mr.retryAt), Permanent: mr.permanent, MaxAttempts: mr.maxAttempts}
	fault := m.arm(t)
	res, err := m.e.l.FailOnly(ctxT(), req, f)
	m.e.fc.Disarm()
	if m.skipUnsent(t, "fail-only", i, req, mr, fault, err) {
		return
	}
	if err != nil {
		t.Fatalf("fail-only of item %d under fault %q: %v", i, fault, err)
	}
	applied := m.items[i].failOnly(mr)
	if res.Applied != applied || applied && res.Found.Status != m.items[i].status {
		t.Fatalf("fail-only of item %d: applied=%v status %q, model says %v %q", i, res.Applied, res.Found.Status, applied, m.items[i].status)
	}
}

// redriveOp moves an item back from failed.
func (m *modelRun) redriveOp(t *rapid.T) {
	i := rapid.IntRange(0, mcItems-1).Draw(t, "item")
	moved, err := m.e.l.Redrive(ctxT(), m.keys[i], m.now)
	if err != nil {
		t.Fatalf("redrive of item %d: %v", i, err)
	}
	row := m.e.core.decodeState(m.rawRow(t, i)) // the claim id the redrive wrote
	if want := m.items[i].redrive(row.Claim); moved != want {
		t.Fatalf("redrive of item %d: moved=%v, model says %v", i, moved, want)
	}
	if moved && (row.Claim == "" || row.Status != StatusPending) {
		t.Fatalf("redrive of item %d: the row shows %+v, want no state and a new claim id", i, row)
	}
	if moved {
		m.newGeneration(i)
	}
}

// external is another client's write: an operator's reprocessing reset (status and done_at
// removed, the attempts kept), a rewrite that wipes the state, a delete, or a recreate.
func (m *modelRun) external(t *rapid.T) {
	i := rapid.IntRange(0, mcItems-1).Draw(t, "item")
	changed := true
	switch rapid.SampledFrom([]string{"reset", "wipe", "delete", "recreate"}).Draw(t, "what") {
	case "reset":
		changed = m.resetRow(t, i)
		m.items[i].reset()
	case "wipe":
		changed = m.wipe(t, i)
		if changed {
			m.effectsOnWipe(i)
		}
	case "delete":
		changed = m.remove(t, i)
		if changed {
			m.effectsOnWipe(i)
		}
	case "recreate":
		changed = m.e.kind == "inline" && !m.items[i].exists
		if changed {
			m.put(t, i)
			m.items[i] = mItem{exists: true}
		}
	}
	if changed {
		m.newGeneration(i)
		m.deadlineOf[i] = time.Time{}
	}
}

func (m *modelRun) newGeneration(i int) { m.told[i], m.unknown[i] = 0, false }

// put writes item i's source item with no state.
func (m *modelRun) put(t *rapid.T, i int) {
	item := map[string]types.AttributeValue{"payload": &types.AttributeValueMemberS{Value: "p"}}
	for n, v := range m.keys[i] {
		item[n] = v
	}
	if _, err := m.e.raw.PutItem(ctxT(), &dynamodb.PutItemInput{TableName: aws.String(m.e.source), Item: item}); err != nil {
		t.Fatalf("put item %d: %v", i, err)
	}
}

// resetRow removes the status and done_at of item i's state row, if it has one.
func (m *modelRun) resetRow(t *rapid.T, i int) bool {
	if m.rawRow(t, i) == nil {
		return false
	}
	table, key := m.stateTable(t, i)
	_, err := m.e.raw.UpdateItem(ctxT(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
		UpdateExpression:         aws.String("REMOVE #s, #d"),
		ExpressionAttributeNames: map[string]string{"#s": m.e.core.names[aStatus], "#d": m.e.core.names[aDoneAt]}})
	if err != nil {
		t.Fatalf("reset item %d: %v", i, err)
	}
	return true
}

// wipe rewrites the inline item without state, or deletes the table ledger's row.
func (m *modelRun) wipe(t *rapid.T, i int) bool {
	if m.e.kind == "inline" {
		if !m.items[i].exists {
			return false
		}
		m.put(t, i)
	} else {
		m.deleteRow(t, i)
	}
	m.items[i] = mItem{exists: true}
	return true
}

// remove deletes the inline item (the table ledger's row then stays as it is: its deletes are
// the wipe).
func (m *modelRun) remove(t *rapid.T, i int) bool {
	if m.e.kind != "inline" {
		return false
	}
	m.deleteRow(t, i)
	m.items[i] = mItem{}
	return true
}

func (m *modelRun) deleteRow(t *rapid.T, i int) {
	table, key := m.stateTable(t, i)
	if _, err := m.e.raw.DeleteItem(ctxT(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
		t.Fatalf("delete item %d: %v", i, err)
	}
}

// stateTable is the table and key of item i's state row.
func (m *modelRun) stateTable(t *rapid.T, i int) (string, Key) {
	if m.e.kind == "inline" {
		return m.e.source, m.keys[i]
	}
	rk, err := m.e.core.row.key(m.keys[i])
	if err != nil {
		t.Fatal(err)
	}
	return m.e.ledgerTable, rk
}
