package work

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON text is UTF-8 (RFC 8259, section 8.1) and its strings are characters. encoding/json turns
// what is neither, a byte that is not UTF-8 or a \uD800 escape without the other half of its
// surrogate pair, into U+FFFD without a word, and the effects would commit the altered text. The
// walk (effects_strict.go) refuses such output instead, saying where.

// notUTF8 says where the output is not UTF-8; nil when it is.
func (w *effectsWalk) notUTF8() error {
	if utf8.Valid(w.out) {
		return nil
	}
	for off := 0; off < len(w.out); {
		r, size := utf8.DecodeRune(w.out[off:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("the output is not UTF-8: byte 0x%02X at %s", w.out[off], w.at(int64(off)))
		}
		off += size
	}
	return nil
}

// loneSurrogate refuses the string just read from start (a name or a value; where names it) when
// one of its escapes is half of a UTF-16 surrogate pair without the other half.
func (w *effectsWalk) loneSurrogate(start int64, where string) error {
	from := w.next(start)
	lit := w.out[from:w.dec.InputOffset()]
	i := loneSurrogateAt(lit)
	if i < 0 {
		return nil
	}
	return fmt.Errorf("%s: %s at %s is half of a UTF-16 surrogate pair without the other half, not a character",
		where, lit[i:i+6], w.at(from+int64(i)))
}

// loneSurrogateAt is the offset in a JSON string literal of its first \u escape of a surrogate
// that is not paired (a high one followed by a low one), or -1.
func loneSurrogateAt(lit []byte) int {
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		r, ok := uEscape(lit[i:])
		if !ok {
			i++ // another escape: its character is not a backslash
			continue
		}
		if utf16.IsSurrogate(r) {
			low, ok := uEscape(lit[i+6:])
			if !ok || utf16.DecodeRune(r, low) == utf8.RuneError {
				return i
			}
			i += 6
		}
		i += 5
	}
	return -1
}

// uEscape is the code unit of the \uXXXX escape that b begins with; ok is false when b begins
// with none.
func uEscape(b []byte) (r rune, ok bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	return rune(n), err == nil
}
