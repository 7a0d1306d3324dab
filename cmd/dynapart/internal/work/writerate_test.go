package work_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/progress"
)

// lastProgress is the last --progress json line of a worker's stdout.
func lastProgress(t *testing.T, stdout string) progress.Line {
	t.Helper()
	var last progress.Line
	sc := bufio.NewScanner(strings.NewReader(stdout))
	n := 0
	for sc.Scan() {
		require.NoError(t, json.Unmarshal(sc.Bytes(), &last), sc.Text())
		n++
	}
	require.Positive(t, n, "progress lines")
	return last
}

// TestWriteRateFlag: --write-rate (or DYNAPART_WRITE_RATE) <= 0 exits 2 naming the flag and
// writes nothing; a valid one reaches the worker (its JSON progress shows the rate allowed) and
// --help describes it.
func TestWriteRateFlag(t *testing.T) {
	c := clitest.New(t)
	table, leases := c.SeededTables(t, 30)
	work := []string{"work", "--table", table, "--lease-table", leases, "--workers", "1", "--once", "--progress", "json"}

	for _, v := range []string{"0", "-5", "NaN", "+Inf"} {
		requireRefused(t, c, table, work, "write-rate", v, "")
	}

	// 30 items x 2 WCU at 20 WCU/s.
	last := lastProgress(t, c.MustRun(append(work, "--write-rate", "20")...))
	require.Equal(t, "exit", last.Event)
	require.Equal(t, int64(30), last.Completed)
	require.Equal(t, 20.0, last.WriteRateAllowed)
	require.Zero(t, last.WriteThrottles)

	cmd := c.Command(work...)
	cmd.Env = append(cmd.Env, "DYNAPART_WRITE_RATE=7.5")
	b, err := cmd.Output()
	require.NoError(t, err)
	require.Equal(t, 7.5, lastProgress(t, string(b)).WriteRateAllowed, "the environment sets it too")

	require.Contains(t, c.MustRun("work", "--help"), "--write-rate")
}
