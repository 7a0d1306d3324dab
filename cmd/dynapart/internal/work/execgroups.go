package work

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
)

// procGroups are the process groups of the --exec commands running now. Each CMD runs in its own
// group (so that a stop kills what it started), which a terminal's Ctrl-C does not reach: a
// second signal, which exits at once, kills them first, or they would go on beside the next run,
// which takes their items over.
type procGroups struct {
	mu       sync.Mutex
	pids     map[int]struct{}
	killed   bool           // killAll ran: a group that starts after it is killed at once
	starting sync.WaitGroup // commands being started, which killAll waits for
}

// runningCmds are this process's running --exec commands.
var runningCmds = &procGroups{pids: map[int]struct{}{}}

// errKilled: a command not started, the process exiting on a second signal.
var errKilled = errors.New("not started: exiting on a second signal")

// run runs cmd (its own process group leader) as cmd.Run does, tracked while it runs.
func (g *procGroups) run(cmd *exec.Cmd) error {
	g.mu.Lock()
	if g.killed {
		g.mu.Unlock()
		return errKilled
	}
	g.starting.Add(1)
	g.mu.Unlock()
	err := cmd.Start()
	g.mu.Lock()
	if err == nil {
		g.pids[cmd.Process.Pid] = struct{}{}
		if g.killed {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	g.starting.Done()
	g.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		g.mu.Lock()
		delete(g.pids, cmd.Process.Pid)
		g.mu.Unlock()
	}()
	return cmd.Wait()
}

// killAll kills every tracked process group with SIGKILL, and those being started once they
// have started (it waits for them); none starts after it.
func (g *procGroups) killAll() {
	g.mu.Lock()
	g.killed = true
	for pid := range g.pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	g.mu.Unlock()
	g.starting.Wait()
}
