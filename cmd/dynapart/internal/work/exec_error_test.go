package work

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// TestExecErrorSaysWhoKilled: a run of CMD killed as its context ended says by what
// (--exec-timeout, the claim's end, the worker's stop, another cause) and wraps that cause; a run
// that exited on its own keeps its own status, exit 65 its permanence, even once the context ended.
func TestExecErrorSaysWhoKilled(t *testing.T) {
	killed := exec.Command("/bin/sh", "-c", "kill -9 $$").Run()
	exited65 := exec.Command("/bin/sh", "-c", "exit 65").Run()
	ended := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	for _, c := range []struct {
		cause error
		want  string
	}{
		{&execTimeoutError{After: time.Second}, "CMD killed after --exec-timeout 1s (signal: killed: the tail)"},
		{worker.ErrClaimExpiring, "CMD killed as its claim was about to expire (--claim-ttl) (signal: killed: the tail)"},
		{worker.ErrStopped, "CMD killed as the worker stopped (--drain-timeout passed) (signal: killed: the tail)"},
		{lock.ErrLeaseLost, "CMD killed as its context ended: lock: lease lost (signal: killed: the tail)"},
	} {
		err := execError(ended(c.cause), killed, "the tail")
		require.EqualError(t, err, c.want)
		require.ErrorIs(t, err, c.cause)
		require.False(t, errors.As(err, new(*worker.PermanentError)), "a kill is not permanent")
	}
	require.EqualError(t, execError(context.Background(), killed, "the tail"), "signal: killed: the tail",
		"a kill the context did not cause is told as it is")
	err := execError(ended(worker.ErrStopped), exited65, "")
	require.EqualError(t, err, "permanent: exit status 65", "a run that exited on its own keeps its status")
}
