package work

import (
	"os/exec"
	"sync"
	"syscall"
)

// procGroups are the process groups of the --exec commands running now. Each CMD runs in its own
// group (so that a stop kills what it started), which a terminal's Ctrl-C does not reach: a
// second signal, which exits at once, kills them first, or they would go on beside the next run,
// which takes their items over.
type procGroups struct {
	mu     sync.Mutex
	pids   map[int]struct{}
	killed bool // killAll ran: a group that starts after it is killed at once
}

// runningCmds are this process's running --exec commands.
var runningCmds = &procGroups{pids: map[int]struct{}{}}

// run runs cmd (its own process group leader) as cmd.Run does, tracked while it runs.
func (g *procGroups) run(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	g.mu.Lock()
	g.pids[pid] = struct{}{}
	if g.killed {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.pids, pid)
		g.mu.Unlock()
	}()
	return cmd.Wait()
}

// killAll kills every tracked process group, and any started after it, with SIGKILL.
func (g *procGroups) killAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed = true
	for pid := range g.pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
