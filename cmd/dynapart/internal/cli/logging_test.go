package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLogLinesDoNotLandInTheProgressBar: on a terminal a log line clears the bar, starts on its
// own line, and the bar is drawn again under it.
func TestLogLinesDoNotLandInTheProgressBar(t *testing.T) {
	var buf bytes.Buffer
	log, line, err := newLogger(logSetup{Level: "info", W: &buf, Terminal: true})
	require.NoError(t, err)
	line.Set("slot 0 ▕██░░▏ 12 done")
	log.Info("lock: acquired", "slot", 0)
	line.Set("slot 0 ▕███░▏ 13 done")
	line.Clear()
	out := buf.String()
	want := eraseLine + "slot 0 ▕██░░▏ 12 done" + eraseLine + "time="
	require.True(t, strings.HasPrefix(out, want), "%q", out)
	logLine := out[len(eraseLine+"slot 0 ▕██░░▏ 12 done"+eraseLine):]
	logLine = logLine[:strings.Index(logLine, "\n")+1]
	require.Contains(t, logLine, `level=INFO msg="lock: acquired" slot=0`)
	require.NotContains(t, logLine, "done", "the bar is not in the log line")
	require.True(t, strings.HasSuffix(out, "\n"+"slot 0 ▕██░░▏ 12 done"+eraseLine+"slot 0 ▕███░▏ 13 done"+eraseLine), "%q", out)

	buf.Reset()
	log.Info("no bar shown") // after Clear: the line alone, no escape codes
	require.NotContains(t, buf.String(), "\033")
}

// TestLogFormat: JSON off a terminal, text on one, and --log-format overrides either way.
func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format   string
		terminal bool
		json     bool
	}{{"auto", false, true}, {"auto", true, false}, {"text", false, false}, {"json", true, true}, {"", false, true}} {
		var buf bytes.Buffer
		log, _, err := newLogger(logSetup{Level: "info", Format: tc.format, W: &buf, Terminal: tc.terminal})
		require.NoError(t, err)
		log.Info("hello", "k", "v")
		var m map[string]any
		require.Equal(t, tc.json, json.Unmarshal(buf.Bytes(), &m) == nil, "format %q terminal %v: %s", tc.format, tc.terminal, buf.String())
	}
	_, _, err := newLogger(logSetup{Level: "info", Format: "xml"})
	require.True(t, IsUsage(err), "a bad --log-format is a usage error: %v", err)
}
