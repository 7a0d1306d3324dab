package lock

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type hold struct {
	owner      string
	slot       int
	token      int64
	start, end time.Time
	lost       bool
}

// 16 contenders share 8 slots over several rounds each: acquire, renew, checkpoint, release. The
// recorded history must show, per slot, strictly increasing tokens in acquisition order and no two
// lease contexts alive at once (beyond the skew margin).
func TestMutualExclusionUnderContention(t *testing.T) {
	db, table := lockTable(t)
	const (
		contenders = 16
		slots      = 8
		rounds     = 4
		skewMargin = 50 * time.Millisecond
	)
	var (
		mu      sync.Mutex
		history []hold
		renews  atomic.Int64
	)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, contenders)
	for i := range contenders {
		c, err := New(db, table, WithOwner(fmt.Sprintf("w%02d", i)), WithLeaseTTL(time.Second),
			WithHeartbeat(100*time.Millisecond), WithMaxClockSkew(skewMargin), WithPollInterval(40*time.Millisecond))
		require.NoError(t, err)
		c.hooks.renewed = func(_ *Lease, outcome string) {
			if outcome == "ok" {
				renews.Add(1)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := c.AcquireSlot(ctx, "g", slots)
				if err != nil {
					errs <- err
					return
				}
				// Simulated work: up to 250 ms, so some holds span a few heartbeats.
				select {
				case <-l.Done():
				case <-time.After(time.Duration(mrand.N(250)) * time.Millisecond):
				}
				_ = l.SaveCheckpoint(ctx, fmt.Sprintf("%s/%d", c.Owner(), l.Token()))
				rerr := l.Release(context.WithoutCancel(ctx))
				l.mu.Lock()
				h := hold{owner: c.Owner(), slot: l.Slot(), token: l.Token(), start: l.AcquiredAt(), end: l.endedAt, lost: rerr != nil}
				l.mu.Unlock()
				mu.Lock()
				history = append(history, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, history, contenders*rounds)
	require.Positive(t, renews.Load(), "holds spanned heartbeats")
	lost := requireExclusive(t, history, slots, skewMargin)
	t.Logf("%d holds over %d slots, %d renews, %d leases lost before release", len(history), slots, renews.Load(), lost)
}

// requireExclusive checks a history of holds: per slot, tokens grow in acquisition order and no
// hold ends later than skewMargin after the next one began. It returns how many holds were lost
// before their release.
func requireExclusive(t *testing.T, history []hold, slots int, skewMargin time.Duration) (lost int) {
	t.Helper()
	bySlot := map[int][]hold{}
	for _, h := range history {
		require.False(t, h.end.Before(h.start), "%+v", h)
		bySlot[h.slot] = append(bySlot[h.slot], h)
	}
	require.Len(t, bySlot, slots, "every slot was used")
	for s, hs := range bySlot {
		sort.Slice(hs, func(i, j int) bool { return hs[i].start.Before(hs[j].start) })
		tokens := make([]int64, len(hs))
		for i, h := range hs {
			tokens[i] = h.token
			if h.lost {
				lost++
			}
			if i == 0 {
				continue
			}
			prev := hs[i-1]
			require.Greater(t, h.token, prev.token, "slot %d: tokens must grow in acquisition order", s)
			require.False(t, prev.end.After(h.start.Add(skewMargin)),
				"slot %d: %s (token %d) held until %s, but %s (token %d) acquired at %s",
				s, prev.owner, prev.token, prev.end.Format(time.StampMicro), h.owner, h.token, h.start.Format(time.StampMicro))
		}
		require.True(t, slices.IsSorted(tokens))
	}
	return lost
}
