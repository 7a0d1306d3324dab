package root_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestLogFormatFromEnv: DYNAPART_LOG_FORMAT goes through the env binding like every flag, and a
// bad value is exit 2.
func TestLogFormatFromEnv(t *testing.T) {
	c := clitest.New(t)
	_, stderr, code := c.RunEnv(map[string]string{"DYNAPART_LOG_FORMAT": "xml"}, "partition", "--workers", "2", "a")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--log-format")
	_, stderr, code = c.RunEnv(map[string]string{"DYNAPART_LOG_FORMAT": "text"}, "partition", "--workers", "2", "a")
	require.Equal(t, 0, code, stderr)
}
