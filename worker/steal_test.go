package worker

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/scan"
)

// skewed is a table whose filter-mode split over 3 slots gives slot 0 three times the items of
// each other slot: attribute "p" is 3*i (slot 0) for the first 3/5 of the items, then 3*i+1 and
// 3*i+2.
func newSkewedFixture(t *testing.T, n int) *fixture {
	f := newFixture(t, 0)
	f.seed(t, 0, n, func(i int, it map[string]types.AttributeValue) {
		p := 3 * i
		switch {
		case i >= n*4/5:
			p += 2
		case i >= n*3/5:
			p++
		}
		it["p"] = &types.AttributeValueMemberN{Value: strconv.Itoa(p)}
	})
	return f
}

func skewedConfig(f *fixture, owner string) Config {
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once, c.Owner = 3, true, owner
	c.Mode, c.PartitionAttr, c.Segments = scan.ModeFilter, "p", 24
	c.Concurrency = 4
	// Leases that survive a loaded machine's pauses: a lease lost mid-handler would be a
	// takeover, whose handlers in flight may run twice.
	c.LeaseTTL, c.Heartbeat, c.MaxClockSkew = 6*time.Second, time.Second, 200*time.Millisecond
	return c
}

// handledLog records every handler call: by item, which worker and which slot's share.
type handledLog struct {
	mu    sync.Mutex
	calls map[string]int
	// stolen counts items of slot 0's share handled by a worker while holding another slot.
	stolen int
}

func newHandledLog() *handledLog { return &handledLog{calls: map[string]int{}} }

func (l *handledLog) handler(delay time.Duration) Handler {
	return func(ctx context.Context, it Item) error {
		time.Sleep(delay)
		p, _ := strconv.Atoi(it.Attrs["p"].(*types.AttributeValueMemberN).Value)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls[keyID(it.Key)]++
		if p%3 == 0 && it.Slot != 0 {
			l.stolen++
		}
		return nil
	}
}

func (l *handledLog) requireOnce(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.calls, n, "every item handled")
	for id, c := range l.calls {
		require.Equal(t, 1, c, "item %s handled %d times", id, c)
	}
}

// runThree runs three once-workers of cfg at once and waits for all.
func runThree(t *testing.T, cfgs []Config, h Handler) []*Worker {
	t.Helper()
	var ws []*Worker
	for _, c := range cfgs {
		w, err := New(c)
		require.NoError(t, err)
		ws = append(ws, w)
	}
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() { errs <- runOnceWithin(t, w, h, 120*time.Second) }()
	}
	for range ws {
		require.NoError(t, <-errs)
	}
	return ws
}

// TestStealingOnASkewedTable: filter mode, 3 slots, slot 0's share 3x the others', 20 ms
// handlers. With stealing, the workers whose slots finish first handle a good part of slot 0's
// items, and every item is handled exactly once (claim mode and complete-only, where the unit
// markers alone keep units exclusive); with NoSteal they handle none of them.
func TestStealingOnASkewedTable(t *testing.T) {
	for _, v := range []struct {
		name                  string
		noSteal, completeOnly bool
	}{{"steal", false, false}, {"steal-complete-only", false, true}, {"no-steal", true, false}} {
		t.Run(v.name, func(t *testing.T) {
			const n = 1500
			f := newSkewedFixture(t, n)
			var cfgs []Config
			for i := range 3 {
				c := skewedConfig(f, "w"+strconv.Itoa(i))
				c.NoSteal, c.CompleteOnly = v.noSteal, v.completeOnly
				cfgs = append(cfgs, c)
			}
			log := newHandledLog()
			start := time.Now()
			ws := runThree(t, cfgs, log.handler(20*time.Millisecond))
			var stolenUnits int64
			for _, w := range ws {
				st := w.Stats()
				stolenUnits += st.Stolen
				t.Logf("%s: leases %d takeovers %d lost %d passes %d stolen %d completed %d skipped %d", w.Config().Owner, st.Leases, st.Takeovers, st.LeasesLost, st.Passes, st.Stolen, st.Completed, st.Skipped)
			}
			log.requireOnce(t, n)
			t.Logf("%s: %s, %d of slot 0's %d items handled by thieves (%d units)", v.name, time.Since(start).Round(time.Millisecond), log.stolen, n*3/5, stolenUnits)
			if v.noSteal {
				require.Zero(t, log.stolen, "NoSteal: nobody takes slot 0's items")
				require.Zero(t, stolenUnits)
				return
			}
			require.Greater(t, log.stolen, n*3/5/5, "thieves handle a good part of slot 0's share")
			require.Positive(t, stolenUnits)
			finished, err := ws[0].JobFinished(context.Background())
			require.NoError(t, err)
			require.True(t, finished)
		})
	}
}
