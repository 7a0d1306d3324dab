package scale_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestScaleOfAFinishedGroup: scaling a finished once-group opens it again (finished=false), and
// scale says so; the next 'work --once' finishes the new plan's slots without handling an item
// again, in segment mode (nothing read again) and filter mode (each new share read again).
func TestScaleOfAFinishedGroup(t *testing.T) {
	for _, mode := range []string{"segment", "filter"} {
		t.Run(mode, func(t *testing.T) {
			c := clitest.New(t)
			table, leases := c.SeededTables(t, 40)
			c.WorkOnce(table, leases, 2, "--mode", mode)
			group := table + "/default"
			require.True(t, finished(t, c, group, leases))

			out := c.MustRun("scale", "--lease-table", leases, "--group", group, "--workers", "3")
			require.Contains(t, out, "the group had finished: it is open again (finished=false) until a 'dynapart work --once' of it finishes")
			require.False(t, finished(t, c, group, leases), "the new plan's slots are not finished")

			handled := filepath.Join(t.TempDir(), "handled")
			c.MustRun("work", "--table", table, "--lease-table", leases, "--mode", mode, "--once", "--progress", "none",
				"--exec", "cat >/dev/null; echo x >> "+handled)
			require.NoFileExists(t, handled, "no item handled again")
			require.True(t, finished(t, c, group, leases))
		})
	}
}

func finished(t *testing.T, c *clitest.CLI, group, leases string) bool {
	t.Helper()
	var d struct {
		Finished bool `json:"finished"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.MustRun("status", "--group", group, "--lease-table", leases, "--json")), &d))
	return d.Finished
}
