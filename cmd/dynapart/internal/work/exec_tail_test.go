package work

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestTailBufferWholeCharacters: stderr's tail, cut to its last 1 KiB, begins at a whole
// character (the cut fell inside "é" and the item's error began with U+FFFD).
func TestTailBufferWholeCharacters(t *testing.T) {
	var tb tailBuffer
	_, _ = tb.Write([]byte(strings.Repeat("é", 700) + "x")) // the last 1,024 bytes begin inside an "é"
	got := tb.String()
	require.True(t, utf8.ValidString(got))
	require.False(t, strings.ContainsRune(got, utf8.RuneError))
	require.Equal(t, strings.Repeat("é", 511)+"x", got)
}
