package worker

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// TestWriteRateConfig: WriteRate defaults to 0 (unlimited); a negative, NaN or infinite one is a
// *ConfigError naming the field.
func TestWriteRateConfig(t *testing.T) {
	base := Config{Client: &crashable{}, Table: "t", Workers: 1}
	w, err := New(base)
	require.NoError(t, err)
	require.Zero(t, w.Config().WriteRate)
	require.Zero(t, w.Stats().WriteRateAllowed, "unlimited")
	for _, v := range []float64{-1, math.NaN(), math.Inf(1)} {
		c := base
		c.WriteRate = v
		_, err := New(c)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, "WriteRate %v", v)
		require.Equal(t, "WriteRate", ce.Field)
	}
	c := base
	c.WriteRate = 50
	w, err = New(c)
	require.NoError(t, err)
	require.Equal(t, 50.0, w.Stats().WriteRateAllowed)
}

// startWriting runs a worker with c and a handler that does nothing until the test ends, and
// returns once its first write was counted.
func startWriting(t *testing.T, c Config) *Worker {
	w, err := New(c)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func(context.Context, Item) error { return nil }) }()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	require.Eventually(t, func() bool { return w.Stats().WCU > 0 }, 30*time.Second, 10*time.Millisecond, "writes start")
	return w
}

// writeRateRun is how long TestWriteRateHeld measures: 10s in `go test`; the 30s run is
// DYNAPART_WRITE_RATE_RUN=30s go test -run TestWriteRateHeld ./worker/.
func writeRateRun(t *testing.T) time.Duration {
	s := os.Getenv("DYNAPART_WRITE_RATE_RUN")
	if s == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, "DYNAPART_WRITE_RATE_RUN")
	return d
}

// TestWriteRateHeld: with WriteRate W and more work than W allows, the WCU the ledger's writes
// consumed (DynamoDB's ConsumedCapacity, the ledger's counter) over the run, after a warm-up that
// spends the first second's burst, is within 10% of W x elapsed, on the real clock.
func TestWriteRateHeld(t *testing.T) {
	const W = 20.0
	const warmUp = 3 * time.Second
	run := writeRateRun(t)
	// Each item costs 2 WCU (claim, complete); half again as many as the run can take.
	n := int(1.5 * W * (warmUp + run).Seconds() / 2)
	f := newFixture(t, n)
	c := f.config(LedgerInline)
	c.Workers, c.Once, c.WriteRate = 1, true, W
	w := startWriting(t, c)
	time.Sleep(warmUp) // measuring a rate: the real clock is the subject
	t0, wcu0 := time.Now(), w.Stats().WCU
	time.Sleep(run)
	st := w.Stats()
	elapsed := time.Since(t0).Seconds()
	got := (st.WCU - wcu0) / elapsed
	t.Logf("WriteRate %.0f: %.1f WCU in %.2fs = %.2f WCU/s (%.1f%% of W); %d of %d items completed, %d throttles",
		W, st.WCU-wcu0, elapsed, got, 100*got/W, st.Completed, n, st.WriteThrottles)
	require.Less(t, st.Completed, int64(n), "the limit, not the work, bounds the run")
	require.GreaterOrEqual(t, got, 0.9*W)
	require.LessOrEqual(t, got, 1.1*W)
	require.Equal(t, W, st.WriteRateAllowed, "no throttling, no back-off")
}

// TestWriteRateBacksOffOnThrottling: ProvisionedThroughputExceeded answers (injected by ddbfault
// into the ledger's UpdateItem calls) are counted, cut the allowed rate and, with it, the WCU
// actually consumed; once they stop, the rate climbs back.
func TestWriteRateBacksOffOnThrottling(t *testing.T) {
	const W = 50.0
	f := newFixture(t, 600)
	fc := ddbfault.New(f.db)
	throttle := ddbfault.Fault{Kind: ddbfault.Throttle, At: 4, Ops: []string{ddbfault.OpUpdateItem}}
	rearm := make(chan struct{}, 1)
	fc.OnInject(func(ddbfault.Injection) {
		select {
		case rearm <- struct{}{}:
		default:
		}
	})
	c := f.config(LedgerInline)
	c.Client, c.Workers, c.Once, c.WriteRate = fc, 1, true, W
	w := startWriting(t, c)

	// Throttle every 4th UpdateItem for 3s: the rate is halved each second.
	stopThrottling := make(chan struct{})
	throttling := make(chan struct{})
	go func() {
		defer close(throttling)
		fc.Inject(throttle)
		for {
			select {
			case <-stopThrottling:
				fc.Disarm()
				return
			case <-rearm:
				fc.Inject(throttle)
			}
		}
	}()
	t0, wcu0 := time.Now(), w.Stats().WCU
	lowest := W
	for time.Since(t0) < 4*time.Second {
		lowest = min(lowest, w.Stats().WriteRateAllowed)
		time.Sleep(20 * time.Millisecond) // sampling a gauge
	}
	st := w.Stats()
	consumed := (st.WCU - wcu0) / time.Since(t0).Seconds()
	close(stopThrottling)
	<-throttling
	t.Logf("throttled for 4s: %d throttles, allowed rate down to %.2f WCU/s, consumed %.1f WCU/s", st.WriteThrottles, lowest, consumed)
	require.GreaterOrEqual(t, st.WriteThrottles, int64(3))
	require.LessOrEqual(t, lowest, W/4, "at least two cuts by half")
	require.Less(t, consumed, W/2, "the writes slowed down")

	after := w.Stats().WriteRateAllowed
	require.Eventually(t, func() bool { return w.Stats().WriteRateAllowed >= after+W/10 },
		5*time.Second, 20*time.Millisecond, "the rate climbs back once the throttling stops")
}
