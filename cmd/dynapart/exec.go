package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/worker"
)

// plainValue turns an attribute value into plain JSON data: S as a string, N as a JSON number with
// all its digits, B as base64, sets as arrays, L and M recursively, NULL as null.
func plainValue(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return json.Number(v.Value)
	case *types.AttributeValueMemberB:
		return base64.StdEncoding.EncodeToString(v.Value)
	case *types.AttributeValueMemberBOOL:
		return v.Value
	case *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberSS:
		return v.Value
	case *types.AttributeValueMemberNS:
		out := make([]json.Number, len(v.Value))
		for i, n := range v.Value {
			out[i] = json.Number(n)
		}
		return out
	case *types.AttributeValueMemberBS:
		out := make([]string, len(v.Value))
		for i, b := range v.Value {
			out[i] = base64.StdEncoding.EncodeToString(b)
		}
		return out
	case *types.AttributeValueMemberL:
		out := make([]any, len(v.Value))
		for i, e := range v.Value {
			out[i] = plainValue(e)
		}
		return out
	case *types.AttributeValueMemberM:
		return plainMap(v.Value)
	}
	return nil
}

func plainMap(m map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = plainValue(v)
	}
	return out
}

// plainJSON encodes an item or key as a plain JSON object (keys sorted, HTML not escaped).
func plainJSON(m map[string]types.AttributeValue) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(plainMap(m)); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// execHandler runs command once per item. The item goes to the command's stdin as a JSON object and
// its key, slot, attempt and token into DYNAPART_* environment variables; the item never reaches a
// shell command line. Exit 0 completes the item; any other exit is a failed attempt whose error is
// the tail of the command's stderr. Exit code 75 (EX_TEMPFAIL) asks for a retry without backoff
// changes; exit 65 (EX_DATAERR) dead-letters at once. The command's stdout goes to out, which
// must be safe for concurrent writes (an *os.File is).
func execHandler(command string, timeout time.Duration, out io.Writer) worker.Handler {
	return func(ctx context.Context, it worker.Item) error {
		body, err := plainJSON(it.Attrs)
		if err != nil {
			return worker.Permanent(fmt.Errorf("encode item as JSON: %w", err))
		}
		key, err := plainJSON(it.Key)
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
