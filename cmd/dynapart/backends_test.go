package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestEndToEndOnEveryBackend: init, seed, two `work --once` processes for two slots, verify, on
// DynamoDB Local and on moto (a DynamoDB nobody here wrote). Small: moto is slow.
func TestEndToEndOnEveryBackend(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		c := newCLI(t)
		db := ddbtest.Client(t)
		table := ddbtest.TableName(t, "")
		leases := ddbtest.TableName(t, "lease")
		ddbtest.DeleteOnCleanup(t, db, table)
		ddbtest.DeleteOnCleanup(t, db, leases)
		c.mustRun("init", "--table", table, "--lease-table", leases)
		c.mustRun("seed", "--table", table, "--items", "60")
		c.workOnce(table, leases, 2, "--lease-ttl", "3s")
		out := c.mustRun("verify", "--table", table, "--json")
		var s map[string]int
		require.NoError(t, json.Unmarshal([]byte(out), &s))
		require.Equal(t, map[string]int{"total": 60, "done": 60, "pending": 0, "claimed": 0, "failed": 0}, s)
	})
}
