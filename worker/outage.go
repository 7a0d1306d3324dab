package worker

import "time"

// DefaultOutageTimeout is Config.OutageTimeout's default.
const DefaultOutageTimeout = 15 * time.Minute

// outage tracks a run of failed passes of one slot holder (see Config.OutageTimeout).
type outage struct {
	since    time.Time // the first failure of the run, zero while passes succeed
	failures int
	// refused: the last failed pass ended on a request DynamoDB refuses for good (stopOnRefusal),
	// and resumed, which the pass after it did: its success does not end the outage, since it
	// resumed past the refused items (see passSucceeded).
	refused, resumed bool
}

// passSucceeded records a pass that succeeded: the outage ends, unless the pass only resumed a
// pass that a refusal ended. That pass went on from the refused pass's checkpoint, past the items
// it could not write, which a later pass meets again: a refusal that lasts ends Run after the
// timeout however few items meet it, and a full pass without one ends the outage.
func (o *outage) passSucceeded() {
	if o.refused && o.resumed {
		o.resumed = false
		return
	}
	*o = outage{}
}

// failed records a failed pass whose error was err, as fail does; the next pass resumes it.
func (o *outage) failed(now time.Time, timeout time.Duration, err error) (giveUp bool) {
	o.refused, o.resumed = refusedForGood(err), true
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
