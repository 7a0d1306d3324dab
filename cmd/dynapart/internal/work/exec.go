package work

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// execHandler runs command once per item. The item goes to the command's stdin as a JSON object and
// its key, slot, attempt and token into DYNAPART_* environment variables; the item never reaches a
// shell command line. Exit 0 completes the item; any other exit is a failed attempt whose error is
// the tail of the command's stderr. Exit code 75 (EX_TEMPFAIL) asks for a retry without backoff
// changes; exit 65 (EX_DATAERR) dead-letters at once. The command's stdout goes to out, which
// must be safe for concurrent writes (an *os.File is).
func execHandler(command string, timeout time.Duration, out io.Writer) worker.Handler {
	return func(ctx context.Context, it worker.Item) error {
		body, err := cli.PlainJSON(it.Attrs)
		if err != nil {
			return worker.Permanent(fmt.Errorf("encode item as JSON: %w", err))
		}
		key, err := cli.PlainJSON(it.Key)
		if err != nil {
			return worker.Permanent(fmt.Errorf("encode key as JSON: %w", err))
		}
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		// The command line is the operator's, fixed at start; item data goes only to stdin and env.
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
		cmd.Stdin = bytes.NewReader(body)
		cmd.Env = append(os.Environ(),
			"DYNAPART_KEY="+string(key),
			"DYNAPART_SLOT="+strconv.Itoa(it.Slot),
			"DYNAPART_ATTEMPT="+strconv.Itoa(it.Attempt),
			"DYNAPART_TOKEN="+strconv.FormatInt(it.Token, 10),
			"DYNAPART_IDEMPOTENCY_KEY="+it.IdempotencyKey,
		)
		var stderr tailBuffer
		cmd.Stdout = out
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		err = cmd.Run()
		if err == nil {
			return nil
		}
		msg := stderr.String()
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if msg == "" {
				msg = exitErr.Error()
			} else {
				msg = exitErr.Error() + ": " + msg
			}
			if exitErr.ExitCode() == 65 {
				return worker.Permanent(errors.New(msg))
			}
			return errors.New(msg)
		}
		return fmt.Errorf("exec: %w", err)
	}
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

func (t *tailBuffer) String() string { return string(bytes.TrimSpace(t.b)) }
