package capacity

import (
	"sync"
	"time"
)

// The adaptive rate's constants: a throttle halves the rate (at most once per AIMDCooldown, so
// that one burst of throttled requests in flight counts as one signal), down to Max/16 (four
// halvings: requests already waiting in a bucket keep the delay of the rate they reserved at, so a
// deeper floor would hold them long after the throttling ends); each whole second after the last
// cut adds Max/10 back, up to Max (the full rate is back at most ten seconds after the last cut).
const (
	AIMDCut      = 0.5
	AIMDCooldown = time.Second
	aimdFloor    = 1.0 / 16
	aimdStep     = 0.1
)

// AIMD is a rate that backs off when throttled: multiplicative decrease on a throttle, additive
// increase back towards its maximum while none come. It only computes the rate, from the times
// it is given; the caller applies it (Bucket.SetRate). Safe for concurrent use.
type AIMD struct {
	max float64

	mu      sync.Mutex
	cur     float64
	tick    time.Time // the start of the current increase step
	lastCut time.Time
}

// NewAIMD starts at max units per second (> 0).
func NewAIMD(max float64) *AIMD { return &AIMD{max: max, cur: max} }

// Throttled records a throttle at now: the rate is cut unless it was cut less than AIMDCooldown
// ago. It returns the rate and whether it changed.
func (a *AIMD) Throttled(now time.Time) (float64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.lastCut.IsZero() && now.Sub(a.lastCut) < AIMDCooldown {
		return a.cur, false
	}
	old := a.cur
	a.cur = max(a.cur*AIMDCut, a.max*aimdFloor)
	a.lastCut, a.tick = now, now
	return a.cur, a.cur != old
}

// Rate returns the rate at now, after the increase of every whole second since the last change,
// and whether it changed.
func (a *AIMD) Rate(now time.Time) (float64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur >= a.max {
		return a.cur, false
	}
	steps := int(now.Sub(a.tick) / time.Second)
	if steps <= 0 {
		return a.cur, false
	}
	a.tick = a.tick.Add(time.Duration(steps) * time.Second)
	a.cur = min(a.max, a.cur+float64(steps)*a.max*aimdStep)
	return a.cur, true
}

// Current is the rate as last computed, without an increase.
func (a *AIMD) Current() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}
