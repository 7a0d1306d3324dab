package work

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// execHandler runs command once per item. The item goes to the command's stdin as a JSON object and
// its key, slot, attempt and token into DYNAPART_* environment variables; the item never reaches a
// shell command line. Exit 0 completes the item; any other exit is a failed attempt whose error is
// the tail of the command's stderr; exit 65 (EX_DATAERR) dead-letters at once; exit 126 or 127 (the
// shell could not run CMD) stops the run (stop, with a *notRunnableError). A command killed as
// its context ended (--exec-timeout, the claim's end, the stop) says so (execError). The
// command's stdout goes to out, which must be safe for concurrent writes (an *os.File is). Once
// out's reader has gone (a pipe to a `head` that exited) the handler stops the run (stop, with
// errOutputClosed) and returns worker.ErrStopped: the attempt is interrupted, not counted, and no
// more commands run.
func execHandler(command string, timeout time.Duration, out io.Writer, stop context.CancelCauseFunc) worker.Handler {
	return func(ctx context.Context, it worker.Item) error {
		if readerGone(out) {
			return stopOnClosedOutput(stop, nil)
		}
		err := execRun(ctx, execCall{command: command, timeout: timeout, stdout: out}, it)
		if err != nil && readerGone(out) {
			return stopOnClosedOutput(stop, err)
		}
		return stopIfNotRunnable(stop, err)
	}
}

// stopOnClosedOutput stops the run for a closed output and returns the handler's ErrStopped,
// with the command's own error (cmdErr) when it ran.
func stopOnClosedOutput(stop context.CancelCauseFunc, cmdErr error) error {
	stop(errOutputClosed)
	if cmdErr == nil {
		return fmt.Errorf("%w: %w", worker.ErrStopped, errOutputClosed)
	}
	return fmt.Errorf("%w: %w (%w)", worker.ErrStopped, errOutputClosed, cmdErr)
}

// execEffectsHandler is execHandler whose command's stdout is the effects to commit with the
// item's completion (--exec-effects; see parseEffects). Output that is not such an object fails
// the attempt permanently (the item is dead-lettered: the command exited 0 with it, and would
// print it again), with an error that says what is wrong and where, as the ledger refuses an
// effect it cannot commit.
func execEffectsHandler(command string, timeout time.Duration, stop context.CancelCauseFunc) worker.Handler {
	return worker.WithEffects(func(ctx context.Context, it worker.Item) (*worker.Effects, error) {
		var stdout limitedBuffer
		err := execRun(ctx, execCall{command: command, timeout: timeout, stdout: &stdout}, it)
		if stdout.over { // whatever its end: stopped reading, CMD dies of SIGPIPE or ends on EPIPE
			return nil, worker.Permanent(fmt.Errorf("--exec-effects: the command's output is over %d bytes (%w)", maxEffectsOutput, errOutputOver))
		}
		if err != nil {
			return nil, stopIfNotRunnable(stop, err)
		}
		eff, err := parseEffects(stdout.b.Bytes())
		if err != nil {
			return nil, worker.Permanent(err)
		}
		return eff, nil
	})
}

// execCall is one run of the --exec command.
type execCall struct {
	command string
	timeout time.Duration
	stdout  io.Writer
}

func execRun(ctx context.Context, c execCall, it worker.Item) error {
	body, err := cli.PlainJSON(it.Attrs)
	if err != nil {
		return worker.Permanent(fmt.Errorf("encode item as JSON: %w", err))
	}
	key, err := cli.PlainJSON(it.Key)
	if err != nil {
		return worker.Permanent(fmt.Errorf("encode key as JSON: %w", err))
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout, &execTimeoutError{c.timeout})
		defer cancel()
	}
	// The command line is the operator's, fixed at start; item data goes only to stdin and env.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", c.command)
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env = append(os.Environ(), cli.ItemEnv{Key: key, Slot: it.Slot, Attempt: it.Attempt, Token: it.Token,
		IdempotencyKey: it.IdempotencyKey, Version: it.Version}.Environ()...)
	var stderr tailBuffer
	cmd.Stdout = c.stdout
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = leftOutputDelay
	if err := exitResult(cmd, runningCmds.run(cmd)); err != nil {
		return execError(ctx, err, stderr.String())
	}
	return nil
}

// exitResult is the outcome of cmd, run with the result err: a CMD that exited on its own is
// judged by its exit status alone, also when its context ended as it exited (Run then reports the
// context's end, and it was not killed). One that exited 0 while a process it started and left
// running holds its output open (ErrWaitDelay) succeeded with what it wrote; the processes it left
// are killed with its process group. A CMD not started (its context ended first) says so.
func exitResult(cmd *exec.Cmd, err error) error {
	ps := cmd.ProcessState
	switch {
	case err != nil && cmd.Process == nil:
		return fmt.Errorf("not started: %w", err) // its context ended first
	case errors.Is(err, exec.ErrWaitDelay):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return nil
	case err == nil || ps == nil || !ps.Exited():
		return err
	case ps.Success():
		return nil
	}
	return &exec.ExitError{ProcessState: ps}
}

// leftOutputDelay is how long after CMD exits its output may stay open (a process it started
// still writing) before it is closed.
const leftOutputDelay = 5 * time.Second

// maxEffectsOutput bounds the --exec-effects output read (DynamoDB commits at most 4 MB).
const maxEffectsOutput = 4 << 20

// limitedBuffer keeps up to maxEffectsOutput bytes and notes more. Past the limit its Write fails,
// which ends the copy of CMD's stdout and closes the pipe: CMD's next write gets SIGPIPE (or EPIPE)
// rather than running on, its output read and dropped, until its claim ends.
type limitedBuffer struct {
	b    bytes.Buffer
	over bool
}

// errOutputOver is the error of a write past maxEffectsOutput.
var errOutputOver = errors.New("the output was not read past the limit, and the command stopped")

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.over || l.b.Len()+len(p) > maxEffectsOutput {
		l.over = true
		return 0, errOutputOver
	}
	return l.b.Write(p)
}

// tailBuffer keeps the last 1 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 1024 {
		t.b = t.b[len(t.b)-1024:]
	}
	return len(p), nil
}

// String is the tail as text, from its first whole character (a cut may fall inside one).
func (t *tailBuffer) String() string {
	b := t.b
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return string(bytes.TrimSpace(b))
}
