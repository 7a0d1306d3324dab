package work

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/scan"
)

// TestReadBillMessage: a continuous worker states its RCU per pass from the table's size, says
// which consistency it assumed, and points at --mode index and --read-rate.
func TestReadBillMessage(t *testing.T) {
	const gb100 = 100 << 30
	for _, tc := range []struct {
		bill             readBill
		perPass, allPass float64
		reads            string
	}{
		{readBill{TableBytes: gb100, Mode: scan.ModeSegment, Workers: 4, PollInterval: 30 * time.Second}, 3276800, 13107200, "eventually consistent"},
		{readBill{TableBytes: gb100, Mode: scan.ModeSegment, Workers: 4, Consistent: true, PollInterval: time.Second}, 6553600, 26214400, "strongly consistent"},
		{readBill{TableBytes: gb100, Mode: scan.ModeFilter, Workers: 4, PollInterval: 30 * time.Second}, 13107200, 52428800, "eventually consistent"},
		{readBill{TableBytes: 5000, Mode: scan.ModeFilter, Workers: 2, PollInterval: time.Second}, 1, 2, "eventually consistent"},
	} {
		var buf bytes.Buffer
		tc.bill.log(slog.New(slog.NewJSONHandler(&buf, nil)))
		var line map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
		msg := line["msg"].(string)
		require.Contains(t, msg, "--mode index")
		require.Contains(t, msg, "--read-rate")
		require.Contains(t, msg, string(tc.bill.Mode)+" mode")
		require.Equal(t, tc.perPass, line["estimated_rcu_per_pass"], buf.String())
		require.Equal(t, tc.allPass, line["estimated_rcu_per_pass_all_workers"], buf.String())
		require.True(t, strings.HasPrefix(line["reads"].(string), tc.reads), line["reads"])
		require.Equal(t, tc.perPass*3600/tc.bill.PollInterval.Seconds(), line["estimated_rcu_per_hour_at_most"])
	}
}
