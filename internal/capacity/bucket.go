package capacity

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Bucket holds its callers to a rate of capacity units per second. DynamoDB only tells the cost
// of a request after it is done, so each request first waits for its estimated cost (Wait) and
// is settled with the ConsumedCapacity it reports (Settle): an overrun is charged at once as debt,
// which delays the following requests; an over-estimate is kept as credit for the next one.
// The bucket counts tokens of 1/scale unit, so that the smallest charge loses nothing. Safe for
// concurrent use.
type Bucket struct {
	lim   *rate.Limiter
	scale float64 // tokens per unit

	mu     sync.Mutex
	burst  int // tokens one reservation may take: one second at the current rate
	credit int // tokens paid for but not consumed
}

// NewBucket allows units per second (> 0) with a burst of one second; scale is the tokens per unit.
func NewBucket(units float64, scale int) *Bucket {
	b := &Bucket{scale: float64(scale)}
	b.burst = b.tokens(units)
	b.lim = rate.NewLimiter(rate.Limit(units*b.scale), b.burst)
	return b
}

// tokens is units as a whole number of tokens, at least 1.
func (b *Bucket) tokens(units float64) int {
	return max(1, int(math.Ceil(units*b.scale)))
}

// SetRate changes the rate to units per second (> 0), and the burst to one second of it.
func (b *Bucket) SetRate(units float64) {
	b.mu.Lock()
	b.burst = b.tokens(units)
	b.mu.Unlock()
	now := time.Now()
	b.lim.SetLimitAt(now, rate.Limit(units*b.scale))
	b.lim.SetBurstAt(now, b.tokens(units))
}

// Wait blocks until the bucket holds the estimated cost of a request (less any credit) and
// returns the tokens taken, for Settle. A request that costs more than the burst (one second at
// the rate) waits for its first burst only: the rest is charged at once as debt, which delays the
// following requests, as Settle charges an overrun. So a request waits no longer than a second of
// the rate past the requests ahead of it, however large: a commit of many writes at a low rate is
// sent within its caller's timeout, and the rate holds on average. When ctx ends first, the tokens
// are given back.
func (b *Bucket) Wait(ctx context.Context, estimate float64) (int, error) {
	now := time.Now()
	want, rs := b.reserve(now, estimate)
	if len(rs) == 0 || rs[0].DelayFrom(now) <= 0 {
		return want, nil
	}
	t := time.NewTimer(rs[0].DelayFrom(now)) // the first burst; the later ones are debt
	defer t.Stop()
	select {
	case <-t.C:
		return want, nil
	case <-ctx.Done():
		for _, r := range rs {
			r.Cancel()
		}
		return 0, ctx.Err()
	}
}

// Charge takes the estimated cost of a request without waiting: the tokens are debt that delays
// the following requests. It returns the tokens taken, for Settle.
func (b *Bucket) Charge(estimate float64) int {
	want, _ := b.reserve(time.Now(), estimate)
	return want
}

// reserve takes the tokens of estimate at now, less any credit, in reservations of one burst at
// most, and returns the tokens taken and the reservations (none when the credit paid for all).
func (b *Bucket) reserve(now time.Time, estimate float64) (int, []*rate.Reservation) {
	want := b.tokens(estimate)
	b.mu.Lock()
	need := want - b.credit
	b.credit = max(0, -need)
	burst := b.burst
	b.mu.Unlock()
	var rs []*rate.Reservation
	for ; need > 0; need -= burst {
		rs = append(rs, b.lim.ReserveN(now, min(need, burst)))
	}
	return want, rs
}

// Settle charges the difference between the tokens taken and the units consumed.
func (b *Bucket) Settle(taken int, consumed float64) {
	used := int(math.Ceil(consumed * b.scale))
	b.mu.Lock()
	if used < taken {
		b.credit += taken - used
	}
	burst := b.burst
	b.mu.Unlock()
	for debt := used - taken; debt > 0; debt -= burst {
		b.lim.ReserveN(time.Now(), min(debt, burst)) // not waited for: it delays the next requests
	}
}
