package seed_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
)

// TestSeedLeavesExistingItems: seeding a processed table writes only the items it lacks and says
// how many it left alone, their content and state kept (verify still counts them done); it used to
// overwrite them silently, making them pending again. --overwrite replaces them.
func TestSeedLeavesExistingItems(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 5)
	c.WorkOnce(table, leases, 1)
	counts := func() map[string]int {
		out, _, _ := c.Run("verify", "--table", table, "--json")
		var s map[string]int
		require.NoError(t, json.Unmarshal([]byte(out), &s), out)
		return s
	}
	require.Equal(t, 5, counts()["done"])

	_, stderr, code := c.Run("seed", "--table", table, "--items", "7")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, `seeded 2 items into "`+table+`"`)
	require.Contains(t, stderr, "5 items already existed and were left as they are")
	s := counts()
	require.Equal(t, 5, s["done"], "the processed items keep their state")
	require.Equal(t, 2, s["pending"])

	_, stderr, code = c.Run("seed", "--table", table, "--items", "7", "--overwrite")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, `seeded 7 items into "`+table+`"`)
	require.NotContains(t, stderr, "already existed")
	require.Equal(t, 7, counts()["pending"], "--overwrite replaces content and state")
}
