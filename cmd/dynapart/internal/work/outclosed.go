package work

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// errStdoutClosed is the cause of a run stopped because the reader of the worker's stdout, which
// --exec commands write to, has gone (`dynapart work --exec CMD | head -1`): every later command
// would fail writing its output, and its item's attempt would be counted against it. The run
// stops as for SIGTERM instead (claims released, attempts not counted) and exits 1, as xargs
// stops when a command is killed by a signal.
var errStdoutClosed = errors.New("stdout closed: its reader has exited")

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
