package chaos

import (
	"strings"
	"testing"

	"github.com/dynapart/dynapart/internal/progress"
)

func procWithLines(owner string, lines ...progress.Line) *Proc {
	return &Proc{Owner: owner, lines: lines, changed: make(chan struct{})}
}

// TestLeasesLostByLoad: a lease a worker reports lost widens the bound by perLoss and is named,
// unless the scenario killed, froze or cut off that worker (its fault is in the bound already), or
// the scenario does not count losses.
func TestLeasesLostByLoad(t *testing.T) {
	lost := progress.Line{Event: "lease-lost", Slot: 1, Token: 2}
	busy := procWithLines("w1", progress.Line{Event: "progress", Slot: 1, Token: 2}, lost)
	killed := procWithLines("w2", progress.Line{Event: "lease-lost", Slot: 0, Token: 1})
	killed.killed = true
	frozen := procWithLines("w3", progress.Line{Event: "lease-lost", Slot: 2, Token: 4})
	frozen.Fault()

	f := &fixture{procs: []*Proc{busy, killed, frozen}}
	r := &Result{SideEffectBound: 58}
	if got := f.leasesLostByLoad(r); len(got) != 0 || r.SideEffectBound != 58 || r.LeasesLost != 0 {
		t.Fatalf("a scenario that does not count losses: got %v, bound %d, lost %d", got, r.SideEffectBound, r.LeasesLost)
	}

	f.countLeaseLosses(58)
	got := f.leasesLostByLoad(r)
	if len(got) != 1 || !got[[2]int64{1, 2}] {
		t.Fatalf("lost leases = %v, want only slot 1 token 2 (w1)", got)
	}
	if r.SideEffectBound != 116 || r.LeasesLost != 1 {
		t.Fatalf("bound %d, lost %d; want 116 and 1", r.SideEffectBound, r.LeasesLost)
	}
	if len(r.Events) != 1 || !strings.Contains(r.Events[0], "w1 (slot 1, token 2)") {
		t.Fatalf("events %q do not name the lost lease", r.Events)
	}
}
