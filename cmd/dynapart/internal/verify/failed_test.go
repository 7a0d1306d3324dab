package verify_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// failed writes one line per dead letter, also when its error has newlines and tabs (the tail of
// a CMD's stderr): the error is quoted then, and reads back with strconv.Unquote. --json keeps it
// as it is.
func TestFailedOneLinePerItem(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 2)
	_, stderr, code := c.Run("work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "none",
		"--exec", `printf 'line one\nline two\ttabbed\n' >&2; exit 65`)
	require.Equal(t, 0, code, stderr)

	out, stderr, code := c.Run("failed", "--table", table)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	for _, line := range lines {
		fields := strings.Split(line, "\t")
		require.Len(t, fields, 4, line)
		msg, err := strconv.Unquote(fields[3])
		require.NoError(t, err, fields[3])
		require.Contains(t, msg, "line one\nline two\ttabbed")
	}

	out, stderr, code = c.Run("failed", "--table", table, "--json")
	require.Equal(t, 0, code, stderr)
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	for _, line := range lines {
		var d struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(line), &d), line)
		require.Contains(t, d.Error, "line one\nline two\ttabbed")
	}
}
