package work

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// procGroups: killAll kills the commands running, waits for those being started (each kills its
// group once started, when killAll has run), and none starts after it.
func TestProcGroupsKillAll(t *testing.T) {
	g := &procGroups{pids: map[int]struct{}{}}
	cmd := exec.Command("/bin/sh", "-c", "exec sleep 30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	done := make(chan error, 1)
	go func() { done <- g.run(cmd) }()
	require.Eventually(t, func() bool { // registered once started
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.pids) == 1
	}, 10*time.Second, 5*time.Millisecond)
	g.killAll()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%v", err)
		require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
	case <-time.After(10 * time.Second):
		t.Fatal("the running command was not killed")
	}
	late := exec.Command("/bin/sh", "-c", "exit 0")
	require.ErrorIs(t, g.run(late), errKilled)
	require.Nil(t, late.Process, "not started after killAll")
}
