package cli

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// OneLine is s as one field of a line of text output: s itself when every character of it prints
// as itself (strconv.IsPrint: no newline, tab, other control character, invalid UTF-8 or
// invisible space) and it does not begin with a double quote, otherwise s quoted as a Go string
// ("line one\nline two"), so that a field that came in quoted reads back with strconv.Unquote.
func OneLine(s string) string {
	if strings.HasPrefix(s, `"`) || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}
