package worker

import "time"

// DefaultOutageTimeout is Config.OutageTimeout's default.
const DefaultOutageTimeout = 15 * time.Minute

// outage tracks a run of failed passes of one slot holder (see Config.OutageTimeout).
type outage struct {
	since    time.Time // the first failure of the run, zero while passes succeed
	failures int
}

// fail records a failed pass at now; it reports whether the run of failures has lasted timeout
// (never when timeout is negative).
func (o *outage) fail(now time.Time, timeout time.Duration) (giveUp bool) {
	if o.failures == 0 {
		o.since = now
	}
	o.failures++
	return timeout >= 0 && now.Sub(o.since) >= timeout
}
