package root_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/worker"
)

// TestEndToEndOnEveryBackend: init, seed, two `work --once` processes for two slots, verify, on
// DynamoDB Local and on moto (a DynamoDB nobody here wrote). Small: moto is slow.
func TestEndToEndOnEveryBackend(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		c := clitest.New(t)
		db := ddbtest.Client(t)
		table := ddbtest.TableName(t, "")
		leases := ddbtest.TableName(t, "lease")
		ddbtest.DeleteOnCleanup(t, db, table)
		ddbtest.DeleteOnCleanup(t, db, leases)
		c.MustRun("init", "--table", table, "--lease-table", leases)
		c.MustRun("seed", "--table", table, "--items", "60")
		c.WorkOnce(table, leases, 2, "--lease-ttl", "3s")
		out := c.MustRun("verify", "--table", table, "--json")
		var s map[string]int
		require.NoError(t, json.Unmarshal([]byte(out), &s))
		require.Equal(t, map[string]int{"total": 60, "done": 60, "pending": 0, "claimed": 0, "failed": 0}, s)

		// Scale the finished group to 3 slots: the slots reopen under the new plan, a worker
		// without --workers joins at N = 3, finds every segment's cursor at its end (composed
		// from the old plan's checkpoints) and finishes the job again without reading anything.
		group := table + "/default"
		require.Contains(t, c.MustRun("scale", "--group", group, "--workers", "3", "--lease-table", leases), "2 -> 3 slots (plan epoch 1)")
		c.MustRun("work", "--table", table, "--lease-table", leases, "--once", "--exec", "false", "--progress", "none")
		var st status.Document
		require.NoError(t, json.Unmarshal([]byte(c.MustRun("status", "--group", group, "--lease-table", leases, "--json")), &st))
		require.Equal(t, 3, st.Workers)
		require.Equal(t, int64(1), st.Epoch)
		require.True(t, st.Finished, "every slot of the new plan finished")
		for _, sl := range st.Slots {
			p, err := worker.ParseSlotProgress(sl.Checkpoint)
			require.NoError(t, err)
			require.Equal(t, int64(1), p.Epoch, "slot %d re-planned", sl.Slot)
			require.Zero(t, p.Scanned, "slot %d read nothing again", sl.Slot)
		}
	})
}
