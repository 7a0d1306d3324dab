package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// logSetup says how to log: --log-level, --log-format, where to, and whether that is a terminal.
type logSetup struct {
	Level    string    // debug, info, warn, error
	Format   string    // auto (text on a terminal, JSON otherwise), text or json
	W        io.Writer // stderr
	Terminal bool      // W is a terminal: the progress bar shares it with the log
}

// newLogger returns the logger and the status line (the progress bar) it shares W with: a log line
// clears the bar, is printed, and the bar is drawn again under it.
func newLogger(s logSetup) (*slog.Logger, *StatusLine, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s.Level)); err != nil {
		return nil, nil, Usagef("--log-level %q: want debug, info, warn or error", s.Level)
	}
	opts := &slog.HandlerOptions{Level: l}
	line := &StatusLine{w: s.W}
	var h slog.Handler
	switch s.Format {
	case "text":
		h = slog.NewTextHandler(s.W, opts)
	case "json":
		h = slog.NewJSONHandler(s.W, opts)
	case "auto", "":
		if s.Terminal {
			h = slog.NewTextHandler(s.W, opts)
		} else {
			h = slog.NewJSONHandler(s.W, opts)
		}
	default:
		return nil, nil, Usagef("--log-format %q: want auto, text or json", s.Format)
	}
	return slog.New(&lineAwareHandler{inner: h, line: line}), line, nil
}

// StatusLine is the last line of a terminal, which the progress bar redraws in place. Log lines
// and the bar take turns on it under one lock.
type StatusLine struct {
	mu   sync.Mutex
	w    io.Writer
	text string // the bar shown now; "" when none
}

const eraseLine = "\r\033[K"

// Set shows text as the status line, in place of the one shown before.
func (s *StatusLine) Set(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(s.w, eraseLine+text)
	s.text = text
}

// Clear removes the status line (at the end of a run).
func (s *StatusLine) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.text != "" {
		fmt.Fprint(s.w, eraseLine)
		s.text = ""
	}
}

// around clears the status line, runs print (which writes whole lines), and draws the line again.
func (s *StatusLine) around(print func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.text != "" {
		fmt.Fprint(s.w, eraseLine)
	}
	err := print()
	if s.text != "" {
		fmt.Fprint(s.w, s.text)
	}
	return err
}

// lineAwareHandler prints each record around the status line.
type lineAwareHandler struct {
	inner slog.Handler
	line  *StatusLine
}

func (h *lineAwareHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *lineAwareHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.line.around(func() error { return h.inner.Handle(ctx, r) })
}

func (h *lineAwareHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineAwareHandler{inner: h.inner.WithAttrs(as), line: h.line}
}

func (h *lineAwareHandler) WithGroup(name string) slog.Handler {
	return &lineAwareHandler{inner: h.inner.WithGroup(name), line: h.line}
}
