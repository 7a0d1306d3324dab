package work

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// An error of the --exec-effects walk says where it is: line and column (in characters) of the
// output. encoding/json's Decoder tells where only roughly: its SyntaxError's Offset counts the
// bytes its scanner read (not those Token reads itself, the delimiters) and ends past the bad byte.

// jsonSpace is JSON's whitespace (RFC 8259: space, tab, line feed, carriage return); nothing else
// (a form feed, U+00A0, U+0085) is.
const jsonSpace = " \t\r\n"

// syntax says what and where a syntax error of the walk is; nil stays nil.
func (w *effectsWalk) syntax(err error) error {
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return w.firstSyntaxError(se)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the output ends inside a JSON value (at %s)", w.at(int64(len(w.out))))
	}
	return err
}

// firstSyntaxError is the output's first syntax error at its byte, found by a scan of the whole
// output (json.Unmarshal checks the text before it decodes, and counts every byte), which meets
// the decoder's error (seen) first as the walk reads in order.
func (w *effectsWalk) firstSyntaxError(seen *json.SyntaxError) error {
	var se *json.SyntaxError
	if !errors.As(json.Unmarshal(w.out, new(json.RawMessage)), &se) || se.Offset > int64(len(w.out)) {
		return fmt.Errorf("%v near %s", seen, w.at(seen.Offset))
	}
	off := max(se.Offset-1, 0) // the byte the scan stopped at
	if w.out[off] < utf8.RuneSelf {
		return fmt.Errorf("%v at %s", se, w.at(off))
	}
	// Outside its strings JSON is ASCII; the error would name the byte as a Latin-1 character.
	r, _ := utf8.DecodeRune(w.out[off:])
	if r == '\uFEFF' {
		return fmt.Errorf("a UTF-8 byte order mark (U+FEFF) at %s: JSON text has none, write the output without it", w.at(off))
	}
	return fmt.Errorf("invalid character %U %q at %s: outside its strings JSON text is ASCII", r, r, w.at(off))
}

// next is the offset of the token after off: past spaces, a comma or a colon.
func (w *effectsWalk) next(off int64) int64 {
	for off < int64(len(w.out)) && strings.IndexByte(jsonSpace+",:", w.out[off]) >= 0 {
		off++
	}
	return off
}

// at is the line and column of byte offset off of the output.
func (w *effectsWalk) at(off int64) string {
	off = min(max(off, 0), int64(len(w.out)))
	before := w.out[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1 // in characters
	return fmt.Sprintf("line %d, column %d", line, col)
}
