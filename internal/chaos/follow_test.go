package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ledger"
)

// TestChaosFollow is the short follow scenario (follow.go) with both ledgers: work --follow
// processes back-fill a table while a writer changes it, one that reads a stream shard is
// SIGKILLed and one is frozen past its lease; every live item's latest value must be handled,
// values in the writer's order, each once but for runs in flight at the faults.
func TestChaosFollow(t *testing.T) {
	t.Parallel()
	// One ledger after the other: four workers and a writer each on a machine the suite loads.
	t.Run("inline", func(t *testing.T) {
		check(t, Follow(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 250, Kills: 1, Timeout: 8 * time.Minute}))
	})
	t.Run("table", func(t *testing.T) {
		check(t, FollowTableLedger(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 150, Kills: 1, Timeout: 8 * time.Minute}))
	})
}

func TestParseHandlerRun(t *testing.T) {
	r, err := parseHandlerRun(`{"id":"item-00000007"} 1000000003 abcVER w2 1 3 1795707703.66180997`)
	require.NoError(t, err)
	assert.Equal(t, handlerRun{key: `{"id":"item-00000007"}`, value: 1000000003, version: "abcVER", owner: "w2",
		lease: [2]int64{1, 3}, at: time.Unix(1795707703, 661809970)}, r)
	r, err = parseHandlerRun(`{"id":"item-00000007"}  abcVER w2 1 3 1795707703.66`) // stdin cut short
	require.NoError(t, err)
	assert.Equal(t, int64(noValue), r.value)
	_, err = parseHandlerRun(`{"id":"item-00000007"} x abcVER w2 1 3 1795707703.66`)
	require.Error(t, err)
	_, err = parseHandlerRun(`{"id":"item-00000007"} 5  w2 1 3 1795707703.66`) // no version
	require.Error(t, err)
}

// TestFollowAuditFindsViolations feeds the follow audit made-up histories: each breaks one
// guarantee, and the audit must name it; the clean ones pass.
func TestFollowAuditFindsViolations(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	k0, k1 := followKey(0), followKey(1)
	hist := func() *followHistory {
		return &followHistory{items: map[string]*writtenItem{
			k0: {values: []int64{0, 10, 11}, rewrites: []valueAt{{value: 11, at: at(5)}}},
			k1: {values: []int64{1}, deleted: at(6)},
		}}
	}
	w0, w1 := [2]int64{0, 1}, [2]int64{0, 2}
	run := func(k string, v int64, owner string, lease [2]int64, s float64) handlerRun {
		return handlerRun{key: k, value: v, version: fmt.Sprintf("v%d", v), owner: owner, lease: lease, at: at(s)}
	}
	done := func(v int64, owner string, lease [2]int64) completionRec {
		return completionRec{version: fmt.Sprintf("v%d", v), owner: owner, lease: lease}
	}
	final := map[string]finalItem{k0: {n: 11, hasN: true, version: "v11", st: ledger.ItemState{Status: ledger.StatusDone, Version: "v11", Owner: "w0", Token: 1}}}
	clean := []handlerRun{run(k0, 0, "w0", w0, 1), run(k1, 1, "w0", w0, 1.5), run(k0, 11, "w0", w0, 2)}
	cleanDone := map[string][]completionRec{k0: {done(0, "w0", w0), done(11, "w0", w0)}, k1: {done(1, "w0", w0)}}
	audit := func(runs []handlerRun, comps map[string][]completionRec, faults ...followFault) *Result {
		r := &Result{}
		if comps == nil {
			comps = cleanDone
		}
		a := &followAudit{hist: hist(), runs: runs, faults: faults, lost: map[[2]int64]bool{},
			owners: map[[2]int64]string{w0: "w0", w1: "w1"}, records: map[string]int{k0: 2, k1: 1}, completions: comps, final: final}
		a.apply(r)
		return r
	}
	with := func(extra ...handlerRun) []handlerRun { return append(append([]handlerRun(nil), clean...), extra...) }
	r := audit(clean, nil)
	require.Empty(t, r.Violations)
	assert.Equal(t, 1, r.Items)
	assert.Equal(t, 1, r.Done)
	assert.Zero(t, r.Missing)

	killedW0 := followFault{kind: "SIGKILL", owner: "w0", lease: w0}
	for _, tc := range []struct {
		name  string
		runs  []handlerRun
		comps map[string][]completionRec
		fault []followFault
		want  string // a violation containing it; "" for none
		dups  int
	}{
		{"older value after a newer one", with(run(k0, 10, "w0", w0, 3)), nil, nil, "older value after a newer one", 0},
		{"a rewrite handled again", with(run(k0, 11, "w1", w1, 6)), nil, nil, "after a rewrite of the same value", 1},
		{"a deleted item handled again", with(run(k1, 1, "w1", w1, 7)), nil, nil, "after the item's delete", 1},
		{"a run cut off by a SIGKILL, then the value's completion", with(run(k0, 11, "w1", w1, 6)),
			map[string][]completionRec{k0: {done(0, "w0", w0), done(11, "w1", w1)}, k1: {done(1, "w0", w0)}}, []followFault{killedW0}, "", 1},
		{"a frozen worker's late run after the value's completion", with(run(k0, 11, "w1", w1, 6)), nil,
			[]followFault{{kind: "SIGSTOP", owner: "w1", lease: w1}}, "", 1},
		{"a run after the value's completion", with(run(k0, 11, "w1", w1, 6)), nil,
			[]followFault{{kind: "SIGSTOP", owner: "w1", lease: [2]int64{1, 1}}}, "no fault to explain it", 1},
		{"a version completed twice", with(run(k0, 11, "w1", w1, 6)),
			map[string][]completionRec{k0: {done(0, "w0", w0), done(11, "w0", w0), done(11, "w1", w1)}, k1: {done(1, "w0", w0)}}, nil, "completed twice", 1},
		{"an older version completed after a newer one", clean,
			map[string][]completionRec{k0: {done(11, "w0", w0), done(0, "w0", w0)}, k1: {done(1, "w0", w0)}}, nil, "older version after a newer one", 0},
		{"a completion of a version no handler ran", clean,
			map[string][]completionRec{k0: {done(0, "w0", w0), done(10, "w0", w0), done(11, "w0", w0)}, k1: {done(1, "w0", w0)}}, nil, "which no handler run was given", 0},
		{"a value as two versions", with(handlerRun{key: k0, value: 10, version: "v11", owner: "w0", lease: w0, at: at(1.8)}), nil, nil, "handled as one version", 0},
		{"a value never written", with(run(k0, 99, "w0", w0, 1.8)), nil, nil, "never wrote", 0},
		{"a killed worker's handler given its item cut short", with(handlerRun{key: k0, value: noValue, version: "v11", owner: "w1", lease: w1, at: at(6)}), nil,
			[]followFault{{kind: "SIGKILL", owner: "w1", lease: w1}}, "", 0},
		{"a handler given its item cut short", with(handlerRun{key: k0, value: noValue, version: "v11", owner: "w1", lease: w1, at: at(6)}), nil, nil, "got no item", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := audit(tc.runs, tc.comps, tc.fault...)
			assert.Equal(t, tc.dups, r.SideEffectDuplicates)
			if tc.want == "" {
				assert.Empty(t, r.Violations)
				if len(tc.fault) > 0 && tc.fault[0].kind == "SIGSTOP" {
					assert.True(t, strings.Contains(strings.Join(r.Events, "\n"), "started after"), "%v", r.Events)
				}
				return
			}
			require.NotEmpty(t, r.Violations)
			assert.True(t, strings.Contains(strings.Join(r.Violations, "\n"), tc.want), "%v", r.Violations)
		})
	}

	// The latest value not handled, or not recorded done at the content's version: missing.
	r = audit(clean[:2], map[string][]completionRec{k0: {done(0, "w0", w0)}, k1: {done(1, "w0", w0)}})
	assert.Equal(t, 1, r.Missing)
	r = &Result{}
	a := &followAudit{hist: hist(), runs: clean, lost: map[[2]int64]bool{}, records: map[string]int{}, completions: cleanDone,
		final: map[string]finalItem{k0: {n: 11, hasN: true, version: "v11", st: ledger.ItemState{Status: ledger.StatusDone, Version: "v10"}}}}
	a.apply(r)
	assert.Equal(t, 1, r.Missing)
	// A deleted item back in the table.
	r = &Result{}
	a = &followAudit{hist: hist(), runs: clean, lost: map[[2]int64]bool{}, records: map[string]int{}, completions: cleanDone,
		final: map[string]finalItem{k0: final[k0], k1: {n: 1, hasN: true}}}
	a.apply(r)
	assert.True(t, strings.Contains(strings.Join(r.Violations, "\n"), "again after its delete"), "%v", r.Violations)
}
