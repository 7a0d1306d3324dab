package work

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/worker"
)

// The bar counts the lease held now against one slot's share. A --once worker that went on from
// slot 1 to slot 0 showed its total over both against one share: a full bar, "1527 done ... ETA -"
// until the end.
func TestSlotBarCountsTheLeaseHeldNow(t *testing.T) {
	b := newSlotBar(1500)
	leases := int64(1)
	working := func(slot int, completed, passes int64) worker.Stats {
		return worker.Stats{Slot: slot, Token: 1, State: worker.StateWorking, Completed: completed, Passes: passes, Leases: leases}
	}
	// The bar's first tick comes after the worker's first items: they are the first lease's.
	line := b.text(working(1, 22, 0), 0)
	require.Contains(t, line, "slot 1 (token 1)")
	require.Contains(t, line, "22/1500 done")
	require.NotContains(t, line, "in all")

	line = b.text(working(1, 700, 0), 100)
	require.Contains(t, line, "▕███████████░░░░░░░░░░░░░▏ 700/1500 done")
	require.Contains(t, line, "ETA 8s")

	// Slot 1's share read: the worker finishes it and takes slot 0, whose share starts at 0.
	leases = 2
	line = b.text(working(0, 1505, 1), 100)
	require.Contains(t, line, "slot 0 (token 1)")
	require.Contains(t, line, "0/1500 done")
	require.Contains(t, line, "(1505 in all)")
	line = b.text(working(0, 2255, 1), 100)
	require.Contains(t, line, "▕████████████░░░░░░░░░░░░▏ 750/1500 done")
	require.Contains(t, line, "ETA 8s", "750 left at 100/s")
	require.Contains(t, line, "(2255 in all)")

	// Slot 0's share read too: what the worker does under the lease from then on (steals, a
	// continuous worker's later passes) has no share to fill; the line counts on without an ETA.
	line = b.text(working(0, 3010, 2), 50)
	require.Contains(t, line, "1505 done in this slot")
	require.NotContains(t, line, "ETA")
	require.NotContains(t, line, "▕")

	line = b.text(worker.Stats{Slot: -1, State: worker.StateFinished, Completed: 3010, Passes: 2}, 0)
	require.Contains(t, line, "finished")
	require.Contains(t, line, "3010 done")
}

// A continuous worker's bar fills once, in its first pass: the items of its later passes (new
// ones) are counted without a share, where its total over every pass kept the bar full.
func TestSlotBarContinuousWorker(t *testing.T) {
	b := newSlotBar(100)
	s := worker.Stats{Slot: 0, Token: 3, State: worker.StateWorking, Leases: 1}
	b.text(s, 0)
	s.Completed, s.Passes = 100, 1
	s.Completed += 5
	line := b.text(s, 1)
	require.Contains(t, line, "105 done in this slot")
	require.NotContains(t, line, "ETA")
	require.NotContains(t, line, "in all", "every item of the worker was done under this lease")
}
