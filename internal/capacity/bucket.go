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
	want, need, credit := b.takeCredit(estimate)
	if need <= 0 {
		return want, nil
	}
	now := time.Now()
	first := min(need, b.burstNow())
	r := b.lim.ReserveN(now, first) // one reservation, which a cancel gives back whole
	if d := r.DelayFrom(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			r.Cancel()
			b.mu.Lock()
			b.credit += credit
			b.mu.Unlock()
			return 0, ctx.Err()
		}
	}
	b.debt(need - first) // the rest delays the requests after this one
	return want, nil
}

// Charge takes the estimated cost of a request without waiting: the tokens are debt that delays
// the following requests. It returns the tokens taken, for Settle.
func (b *Bucket) Charge(estimate float64) int {
	want, need, _ := b.takeCredit(estimate)
	b.debt(need)
	return want
}

// takeCredit pays what it can of estimate from the credit: the tokens wanted, those still needed,
// and the credit used.
func (b *Bucket) takeCredit(estimate float64) (want, need, used int) {
	want = b.tokens(estimate)
	b.mu.Lock()
	defer b.mu.Unlock()
	used = min(b.credit, want)
	b.credit -= used
	return want, want - used, used
}

// debt reserves n tokens without waiting for them: they delay the next requests.
func (b *Bucket) debt(n int) {
	for burst := b.burstNow(); n > 0; n -= burst {
		b.lim.ReserveN(time.Now(), min(n, burst))
	}
}

// burstNow is the most tokens one reservation may take.
func (b *Bucket) burstNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.burst
}

// Settle charges the difference between the tokens taken and the units consumed.
func (b *Bucket) Settle(taken int, consumed float64) {
	used := int(math.Ceil(consumed * b.scale))
	b.mu.Lock()
	if used < taken {
		b.credit += taken - used
	}
	b.mu.Unlock()
	b.debt(used - taken)
}
