package status_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
)

// TestStatusCountsTheItemsTheStreamBrought: a follower read its share (5 items) and follows the
// stream; an item written then is handled from the stream. status counts it: 6 of ~6 done, as
// verify says, not 5 of ~6 for good.
func TestStatusCountsTheItemsTheStreamBrought(t *testing.T) {
	f, w, stop := startFollowedGroup(t)
	require.Eventually(t, func() bool { // the worker reads on its own clock: no signal to wait on
		st, err := f.locks.GroupStatus(context.Background(), f.group)
		return err == nil && len(st.Slots) == 1 && strings.HasSuffix(st.Slots[0].Checkpoint, "|follow")
	}, time.Minute, 50*time.Millisecond, "the share read, the slot follows the stream")
	f.put(t, "new-0")
	require.Eventually(t, func() bool {
		st := w.Stats().Follow
		return st != nil && st.Handled >= 1
	}, time.Minute, 50*time.Millisecond, "the stream brought the new item")
	if err := stop(); err != nil {
		require.ErrorIs(t, err, context.Canceled)
	}

	f.c.MustRun("verify", "--table", f.table) // exit 0: every item done
	var d status.Document
	require.NoError(t, json.Unmarshal([]byte(f.c.MustRun("status", "--group", f.group, "--lease-table", f.leases, "--json")), &d))
	require.Equal(t, int64(6), d.Progress.Done, "the pass's 5 and the stream's 1")
	require.Equal(t, int64(0), *d.Progress.Left)
	require.Equal(t, int64(6), *d.Throughput.Done)
	require.Equal(t, 1.0, *d.Throughput.Fraction)
	text := f.c.MustRun("status", "--group", f.group, "--lease-table", f.leases)
	require.Contains(t, text, "group: 6 of ~6 done (100.0%), 0 left, ETA done\n")
}
