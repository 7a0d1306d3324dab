package worker

import "time"

// DefaultOutageTimeout is Config.OutageTimeout's default.
const DefaultOutageTimeout = 15 * time.Minute

// outage tracks a run of failed passes of one slot holder (see Config.OutageTimeout).
type outage struct {
	since    time.Time // the first failure of the run, zero while passes succeed
	failures int
	// refused: a failed pass of this outage ended on a request DynamoDB refuses for good
	// (stopOnRefusal); resumed: the last failure was a pass's, which the next pass resumes; kept:
	// a pass that resumed a refused one succeeded, and the outage goes on (see passSucceeded).
	refused, resumed, kept bool
}

// passSucceeded records a pass that succeeded: the outage ends, unless the pass only resumed a
// pass that a refusal ended. That pass went on from the refused pass's checkpoint, past the items
// it could not write, which the next full pass meets again: a refusal that lasts ends Run after
// the timeout however few items meet it, and a full pass without one ends the outage.
func (o *outage) passSucceeded() {
	if o.refused && o.resumed {
		o.resumed, o.kept = false, true
		return
	}
	*o = outage{}
}

// failed records a failure, whose error was err, of a pass (resumes: the next pass resumes it) or
// of a follow, as fail does. A failure other than a refusal after a kept outage begins a new one.
func (o *outage) failed(now time.Time, timeout time.Duration, err error, resumes bool) (giveUp bool) {
	refusal := refusedForGood(err)
	if o.kept && !refusal {
		*o = outage{}
	}
	o.refused, o.resumed, o.kept = o.refused || refusal, resumes, false
	return o.fail(now, timeout)
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
