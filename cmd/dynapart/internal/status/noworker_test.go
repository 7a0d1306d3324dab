package status

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// TestNoPaceWithoutAWorker: a slot no live worker holds (its worker stopped, or a scale left it
// free with the old plan's checkpoint) has no rate and no ETA, however fast its last holder read;
// the group's rate is its held slots', and with none the group's ETA is unknown, in text, in
// --json and on the page, whatever the page's samples measured before.
func TestNoPaceWithoutAWorker(t *testing.T) {
	items := int64(500)
	// 42 items read in 4 s (10.5/s), 32 done, under plan epoch 0.
	stopped := lock.SlotStatus{Slot: 0, Owner: "w1", Released: true, Checkpoint: "dp3|0.1|0|0|32.0.42.4000|"}
	p, _ := slotProgressOf(stopped, &items)
	require.Equal(t, 0.0, p.Rate, "nobody holds the slot")
	require.Nil(t, p.ETASeconds)
	held := stopped
	held.Held, held.Released = true, false
	p, _ = slotProgressOf(held, &items)
	require.InDelta(t, 10.5, p.Rate, 1e-9)
	require.NotNil(t, p.ETASeconds)

	var buf bytes.Buffer
	printProgressText(&buf, []lock.SlotStatus{stopped}, 1, &items, false)
	require.Contains(t, buf.String(), "group: 32 of ~500 done (6.4%), 468 left, ETA unknown: no worker holds a slot; 1 slot free (dynapart work to go on)\n")
	require.Regexp(t, `(?m)^0\s+1\s+32\s+0\s+42\s+-\s+no worker$`, buf.String())

	doc := &Document{Slots: []slotDoc{{slotJSON: slotJSON{Slot: 0, Released: true}}}}
	doc.Slots[0].Progress, _ = slotProgressOf(stopped, &items)
	doc.Progress = groupProgressOf(doc.Slots, 1, &items)
	require.Equal(t, 0.0, doc.Progress.Rate)
	require.Nil(t, doc.Progress.ETASeconds)
	require.Zero(t, doc.Progress.WorkingSlots)
	t0 := time.UnixMilli(1_750_000_000_000)
	samples := []sample{{T: t0.UnixMilli(), Done: 20}, {T: t0.Add(2 * time.Second).UnixMilli(), Done: 32}}
	tp := throughputOf(samples, nil, doc, 2*time.Second)
	require.Positive(t, tp.Rate, "measured while the worker ran")
	require.Nil(t, tp.ETASeconds, "but nobody holds a slot now")
}

// TestGroupRateOnlyFromHeldSlots: after a scale, a slot left free keeps the old plan's
// checkpoint, which says so, and neither its rate nor its ETA counts for the group's.
func TestGroupRateOnlyFromHeldSlots(t *testing.T) {
	items := int64(3000)
	share := shareOf(&items, 3)
	slots := []lock.SlotStatus{
		{Slot: 0, Owner: "w1", Held: true, Epoch: 1, Checkpoint: "dp3|1.3|0|0|100.0.500.10000|"}, // 50/s
		{Slot: 1, Owner: "w0", Released: true, Checkpoint: "dp3|0.2|0|0|400.0.670.10000|"},       // 67/s once
		{Slot: 2},
	}
	docs := make([]slotDoc, len(slots))
	for i, s := range slots {
		docs[i] = slotDoc{slotJSON: slotJSON{Slot: s.Slot, Held: s.Held, Released: s.Released}}
		docs[i].Progress, _ = slotProgressOf(s, share)
	}
	g := groupProgressOf(docs, 3, &items)
	require.InDelta(t, 50, g.Rate, 1e-9, "the held slot's rate only")
	require.Equal(t, 1, g.WorkingSlots)
	require.Equal(t, 2, g.FreeSlots)
	require.InDelta(t, float64(3000-500)/50, *g.ETASeconds, 1e-9)

	var buf bytes.Buffer
	printText(&buf, statusJSON{Group: "g", Workers: 3, Epoch: 1, Slots: []slotJSON{
		{Slot: 0, Checkpoint: slots[0].Checkpoint}, {Slot: 1, Checkpoint: slots[1].Checkpoint}}})
	require.Contains(t, buf.String(), "pass 1, not started\n", "slot 0's checkpoint is the plan's")
	require.Contains(t, buf.String(), "pass 1, not started (plan epoch 0's, before a scale)\n")
}
