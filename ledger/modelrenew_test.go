package ledger

import (
	"pgregory.net/rapid"
)

// renewOp reopens a finished item for a new version (versioned ledgers, see version.go), with the
// claim id the caller read (or a stale one), under a drawn fault. The model: a finished item whose
// claim id is prev becomes a retry due now less the ledger's skew (due at once on every clock
// within it) with attempts 0 and a new claim id (read back: the ledger makes it); anything else is
// left as it is.
func (m *modelRun) renewOp(t *rapid.T) {
	i := rapid.IntRange(0, mcItems-1).Draw(t, "item")
	before := m.items[i]
	prev := before.claim
	if rapid.Bool().Draw(t, "stale") {
		prev = "stale-" + newID()
	}
	fault := m.arm(t)
	id, err := m.e.l.Renew(ctxT(), m.keys[i], prev, m.now)
	ok := id != ""
	m.e.fc.Disarm()
	want := before.exists && before.status.Finished() && before.claim == prev && prev != ""
	if notSent(fault) {
		if err == nil && ok {
			t.Fatalf("renew of item %d under %s: renewed, want nothing sent", i, fault)
		}
		return
	}
	row := m.e.core.decodeState(m.rawRow(t, i))
	landed := want && row.Status == StatusRetry && row.Claim != prev
	switch {
	case err != nil && !sendLost(fault):
		t.Fatalf("renew of item %d under fault %q: %v", i, fault, err)
	case err == nil && ok != want:
		t.Fatalf("renew of item %d (%+v, prev %q): renewed=%v, model says %v", i, before, prev, ok, want)
	case err == nil && ok != landed:
		t.Fatalf("renew of item %d: renewed=%v but the row shows %+v", i, ok, row)
	case ok && row.Claim != id:
		t.Fatalf("renew of item %d: returned claim id %q, the row shows %q", i, id, row.Claim)
	}
	if !landed {
		return
	}
	it := &m.items[i]
	it.status, it.retryAt, it.attempts, it.claim = StatusRetry, m.now.Add(-m.e.core.skew).UnixMilli(), 0, row.Claim
	m.newGeneration(i)
}
