package work

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// errOutputClosed is the cause of a run stopped because the reader of the worker's stdout or
// stderr has gone (`dynapart work --exec CMD | head -1`): every later command would fail writing
// its output, and its item's attempt would be counted against it; the worker's own next line
// would kill it with SIGPIPE, its claims left to expire. The run stops as for SIGTERM instead
// (claims released, the attempts it interrupts not counted) and exits 1, as xargs stops when a
// command is killed by a signal.
var errOutputClosed = errors.New("the worker's stdout or stderr is closed: its reader has exited")

// readerGone reports whether out is a pipe (or socket) whose reading end has been closed: poll
// reports an error condition on it. Any other writer, or a file that cannot be polled, is open.
func readerGone(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	rc, err := f.SyscallConn() // unlike Fd, leaves the file's blocking mode alone
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, 0)
		gone = err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
	})
	return gone
}

// sigpipe receives SIGPIPE once watchOutput has asked for it. Asking turns a write of the
// process to a broken pipe (its stdout or stderr included) into an EPIPE error instead of an exit
// by signal, for the rest of the process's life: the message of a stop must still end in exit 1.
// Commands the worker starts get SIGPIPE's default action, as before (a handler, not an ignore).
var (
	sigpipe     = make(chan os.Signal, 1)
	sigpipeOnce sync.Once
)

// watchOutput stops the run (stop, with errOutputClosed) when one of outs is a pipe whose reader
// has gone, as a failed write of the worker's own output tells (SIGPIPE). A SIGPIPE from any other
// write (a connection to DynamoDB reset) is not such a stop. end ends the watch.
func watchOutput(stop context.CancelCauseFunc, outs ...io.Writer) (end func()) {
	sigpipeOnce.Do(func() { signal.Notify(sigpipe, syscall.SIGPIPE) })
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigpipe:
				if anyGone(outs) {
					stop(errOutputClosed)
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

// anyGone reports whether any of outs has lost its reader.
func anyGone(outs []io.Writer) bool {
	for _, o := range outs {
		if readerGone(o) {
			return true
		}
	}
	return false
}
