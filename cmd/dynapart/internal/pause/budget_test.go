package pause_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/internal/progress"
)

// TestBudgetPausesAndResumeRaises: two `work --once --max-wcu 200` workers on 600 items (2 WCU
// each: a claim and a completion) pause their group by themselves once it has consumed its budget,
// a few seconds' worth of units past it at most: they keep their slots and do nothing more, status
// says paused for the budget with the figures (JSON and text). A resume with a budget below the
// consumption exits 2 and changes nothing; `resume --max-wcu 5000` raises it and the workers finish
// every item, once.
func TestBudgetPausesAndResumeRaises(t *testing.T) {
	const items, budget = 600, 200
	c := clitest.New(t)
	table, leases := c.SeededTables(t, items)
	group := table + "/default"
	procs := startWorkers(t, c, table, leases, "--exec", "sleep 0.01", "--lease-ttl", "3s", "--heartbeat", "300ms",
		"--max-wcu", fmt.Sprint(budget), "--budget-interval", "300ms")
	for _, pr := range procs {
		pr.progress.WaitFor(t, 60*time.Second, func(l progress.Line) bool { return l.Paused })
	}
	doc := statusDoc(t, c, group, leases)
	require.True(t, doc.Paused)
	require.NotNil(t, doc.PausedReason)
	require.Equal(t, "budget", *doc.PausedReason)
	require.NotNil(t, doc.Budget)
	require.Equal(t, float64(budget), *doc.Budget.MaxWCU)
	require.Nil(t, doc.Budget.MaxRCU)
	require.GreaterOrEqual(t, doc.Budget.UsedWCU, float64(budget))
	require.True(t, doc.Budget.Reached)
	used := doc.Budget.UsedWCU
	t.Logf("paused at %.0f WCU reported for a budget of %d", used, budget)
	require.Less(t, used, float64(2*items), "paused before the job was done")
	for _, s := range doc.Slots {
		require.True(t, s.Held, "slot %d kept while paused", s.Slot)
	}
	text := c.MustRun("status", "--group", group, "--lease-table", leases)
	require.Contains(t, text, "PAUSED (budget reached")
	require.Contains(t, text, fmt.Sprintf("of %d WCU", budget))

	_, stderr, code := c.Run("work", "--table", table, "--lease-table", leases, "--once", "--exec", "true", "--max-wcu", "100")
	require.Equal(t, 2, code, "a worker with a budget below the consumption: %s", stderr)
	require.Contains(t, stderr, "--max-wcu 100 is below the")
	_, stderr, code = c.Run("resume", "--group", group, "--lease-table", leases, "--max-wcu", "100")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--max-wcu 100 is below the")
	_, stderr, code = c.Run("resume", "--group", group, "--lease-table", leases) // without a larger budget
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "would still be at its budget")
	require.Contains(t, stderr, fmt.Sprintf("of %d WCU", budget))
	doc = statusDoc(t, c, group, leases)
	require.True(t, doc.Paused, "a refused resume changes nothing")
	require.Equal(t, float64(budget), *doc.Budget.MaxWCU)

	out := c.MustRun("resume", "--group", group, "--lease-table", leases, "--max-wcu", "5000")
	require.Contains(t, out, "budget")
	require.Contains(t, out, "of 5000 WCU")
	require.Contains(t, out, "resumed")
	for _, pr := range procs {
		require.NoError(t, pr.wait())
	}
	var sum map[string]int
	require.NoError(t, json.Unmarshal([]byte(c.MustRun("verify", "--table", table, "--json")), &sum))
	require.Equal(t, items, sum["done"])
	doc = statusDoc(t, c, group, leases)
	require.False(t, doc.Paused)
	require.Nil(t, doc.PausedReason)
	require.GreaterOrEqual(t, doc.Budget.UsedWCU, float64(2*items), "every claim and completion reported")
}

func statusDoc(t *testing.T, c *clitest.CLI, group, leases string) status.Document {
	t.Helper()
	var doc status.Document
	require.NoError(t, json.Unmarshal([]byte(c.MustRun("status", "--group", group, "--lease-table", leases, "--json")), &doc))
	return doc
}
