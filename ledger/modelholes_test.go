package ledger

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// TestLedgerModelFindsHoles puts back, one at a time, four holes an adversarial review found in
// dynapart before this package existed, as changes to the machine, and checks that the
// model-based test finds each: a test that cannot fail proves nothing.
func TestLedgerModelFindsHoles(t *testing.T) {
	for _, h := range []struct {
		name   string
		mutate func(*core)
	}{
		// Hole 1: a fresh claim counted the attempt on top of one an operator's reset left, while
		// the batched claim took it for attempt 1.
		{"1 fresh claim adds to a reset item's attempts", func(l *core) {
			l.ops[OpClaimFresh] = compile(withoutSet(l.ops[OpClaimFresh].transition, aAttempts, addTo{aAttempts, vOne}), l.names)
		}},
		// Hole 2: complete-only ignored live claims of another group.
		{"2 complete-only takes a live claim", func(l *core) {
			t := l.ops[OpCompleteOnly].transition
			t.cond = and(present(aExists), not(in(aStatus, vDone, vFailed)))
			l.ops[OpCompleteOnly] = compile(t, l.names)
		}},
		// Hole 5: claim expiry allowed no clock skew.
		{"5 claim expiry without clock skew", func(l *core) { l.skew = 0 }},
		// Hole 6: a complete-only write whose answer was lost was not recognised as the caller's.
		{"6 a lost complete-only answer counted as skipped", func(l *core) {
			l.ops[OpCompleteOnly].identified = false
			l.ops[OpCompleteOnlyFresh].identified = false
		}},
	} {
		t.Run(h.name, func(t *testing.T) {
			e := newModelEnv(t, "inline", h.mutate)
			failed, msg := checkFails(t, e.property)
			if !failed {
				t.Fatalf("the model-based test did not find hole %q in %d sequences", h.name, e.seq.Load())
			}
			t.Logf("found after %d sequences: %s", e.seq.Load(), msg)
		})
	}
}

// withoutSet is t with the SET of a removed and add added.
func withoutSet(t transition, a attr, add addTo) transition {
	var sets []setTo
	for _, s := range t.upd.set {
		if s.a != a {
			sets = append(sets, s)
		}
	}
	t.upd = update{set: sets, add: append(append([]addTo(nil), t.upd.add...), add), remove: t.upd.remove}
	return t
}

// checkFails runs rapid.Check on prop (up to 100 sequences, little shrinking) and reports whether
// it failed, with its message, instead of failing t.
func checkFails(t *testing.T, prop func(*rapid.T)) (bool, string) {
	mcFlags(100, 40)
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(rec, prop)
	}()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.failed, rec.msg
}

// recordingTB is a rapid.TB that records a failure instead of failing the test; FailNow ends the
// goroutine rapid.Check runs in.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msg    string
}

func (r *recordingTB) fail(args ...any) {
	r.mu.Lock()
	r.failed = true
	if r.msg == "" {
		r.msg = fmt.Sprint(args...)
		if len(r.msg) > 400 {
			r.msg = r.msg[:400] + "..."
		}
	}
	r.mu.Unlock()
}

func (r *recordingTB) Error(args ...any)                 { r.fail(args...) }
func (r *recordingTB) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recordingTB) Fatal(args ...any)                 { r.fail(args...); runtime.Goexit() }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recordingTB) FailNow()            { r.fail("FailNow"); runtime.Goexit() }
func (r *recordingTB) Fail()               { r.fail("Fail") }
func (r *recordingTB) Failed() bool        { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recordingTB) Log(args ...any)     {}
func (r *recordingTB) Logf(string, ...any) {}
