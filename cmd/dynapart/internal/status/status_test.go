package status_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

func TestStatusBadUsage(t *testing.T) {
	c := clitest.New(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"status", "--group", "g", "--json", "--interval", "0s"}, "--interval"},
		{[]string{"status", "--group", "g", "--json", "--ledger", "table"}, "--ledger needs --table"},
		{[]string{"status", "--group", "g", "--serve", "256.0.0.1:1"}, "--serve"},
		{[]string{"status", "--serve", "127.0.0.1:0"}, "--group"},
	} {
		_, stderr, code := c.Run(tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.says)
	}
}
