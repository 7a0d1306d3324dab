package sweep

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

func fixture(t *testing.T) *Fixture {
	db := ddbtest.Client(t)
	f, err := NewFixture(context.Background(), db)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close(context.Background())) })
	return f
}

// TestSweepCase replays the one case SWEEP_CASE names (as a violation report prints it), e.g.
// SWEEP_CASE=inline.single.segment.fail-then-succeed.w1/lost-answer-retried/k17. Without it, it
// replays a case whose fault is the SDK's repeat of a landed claim without the old item (the
// first hole the sweep found after issue 12's), so the replay path itself is tested.
func TestSweepCase(t *testing.T) {
	name := os.Getenv("SWEEP_CASE")
	if name == "" {
		name = "inline.single.segment.succeed.w1/lost-answer-retried-no-old/k18"
	}
	c, err := ParseCase(name)
	require.NoError(t, err)
	r := fixture(t).Run(context.Background(), c)
	t.Logf("%s (%s)", r, r.Wall)
	require.True(t, r.OK(), "%s", r)
}

// seed is the small sweep's sample seed: SWEEP_SEED, or a fixed one.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("SWEEP_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		return v
	}
	return 12
}

// TestSweep is the small deterministic fault sweep: every k of a fault-free run for a few
// combinations and kinds, plus a seeded sample of the full cross product. Each run is a subtest
// named by its case (see Case.String), so `-run 'TestSweep/<case>'` replays one.
func TestSweep(t *testing.T) {
	f := fixture(t)
	ctx := context.Background()
	start := time.Now()
	var cases []Case
	for i, c := range SmallCombos() {
		base := f.Baseline(ctx, c)
		require.Truef(t, base.OK(), "fault-free run broke: %s", base)
		cases = append(cases, EveryK(c, SmallKinds(i), base.Calls, 1, 0)...)
	}
	s := seed(t)
	cases = append(cases, Sample(s, 24, 50)...)
	t.Logf("small sweep: %d runs, sample seed %d (SWEEP_SEED)", len(cases), s)
	var runs, injected, broken int
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			r := f.Run(ctx, c)
			runs++
			if r.Injected != nil {
				injected++
			}
			if !r.OK() {
				broken++
				t.Errorf("%s", r)
			}
		})
	}
	t.Logf("small sweep: %d runs, %d faults injected, %d runs with violations, %s", runs, injected, broken, time.Since(start).Round(time.Second))
}
