package worker

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The outage of a slot holder across refusals (helper-65): a pass that resumes a refused one does
// not end it, a full pass does, and a failure of another kind after such a resumed pass begins a
// new outage rather than extending the refusal's.
func TestOutageAcrossRefusals(t *testing.T) {
	const timeout = time.Minute
	t0 := time.Now()
	refusal, blip := deniedErr("UpdateItem"), errors.New("connection reset")

	var o outage
	require.False(t, o.failed(t0, timeout, refusal, true))
	o.passSucceeded() // resumed the refused pass, past its items: the outage goes on
	require.True(t, o.failed(t0.Add(2*time.Minute), timeout, refusal, true), "the refusal lasted the timeout")

	o = outage{}
	require.False(t, o.failed(t0, timeout, refusal, true))
	o.passSucceeded()
	require.False(t, o.failed(t0.Add(20*time.Minute), timeout, blip, true), "another kind of failure begins a new outage")
	require.Equal(t, 1, o.failures)

	o = outage{}
	require.False(t, o.failed(t0, timeout, refusal, true))
	o.passSucceeded() // the resumed pass
	o.passSucceeded() // a full pass without a refusal: the outage ends
	require.Zero(t, o.failures)

	o = outage{}
	require.False(t, o.failed(t0, timeout, refusal, false)) // a follow's: it resumes no pass
	o.passSucceeded()
	require.Zero(t, o.failures, "a pass after a follow's refusal ends the outage")

	o = outage{}
	require.False(t, o.failed(t0, timeout, refusal, true))
	require.False(t, o.failed(t0.Add(time.Second), timeout, blip, true)) // the resumed pass fails otherwise
	o.passSucceeded()
	require.True(t, o.failed(t0.Add(2*time.Minute), timeout, refusal, true), "the refusal is remembered through the outage")
}
