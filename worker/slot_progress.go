package worker

import (
	"time"

	"github.com/dynapart/dynapart/scan"
)

// SlotProgress is a slot's checkpoint read back for people (dynapart status): which pass the slot
// is in, how far its scan got, and the counts saved with it.
type SlotProgress struct {
	Epoch    int64         // the group's plan epoch the checkpoint was made under (0 before any resize)
	Pass     int           // passes over the share completed before this one
	Dirty    bool          // this pass met items that need another pass (retries, claims elsewhere)
	Position scan.Position // the scan position; no Cursors before the first checkpoint

	// Done and Failed count the items the slot's holders moved to done and to failed, over all
	// passes. Scanned counts the items read in this pass, Elapsed its working time (pauses
	// excluded), so Scanned / Elapsed is the pass's rate. All zero for a checkpoint written before
	// counts were saved. Exact after a clean run; a holder that dies loses (or its successor
	// repeats) what it counted since its last checkpoint save.
	Done, Failed, Scanned int64
	Elapsed               time.Duration
}

// SegmentsDone counts the segments (shards in index mode) of the position that are read to the
// end, out of TotalSegments.
func (p SlotProgress) SegmentsDone() (done, total int) {
	for _, c := range p.Position.Cursors {
		if c.Done {
			done++
		}
	}
	return done, len(p.Position.Cursors)
}

// Rate is the items read per second in this pass (0 before any working time).
func (p SlotProgress) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Scanned) / p.Elapsed.Seconds()
}

// ParseSlotProgress decodes a slot checkpoint as the worker writes it ("" is a slot that has not
// checkpointed yet). The counts are kept when only the scan position cannot be read.
func ParseSlotProgress(checkpoint string) (SlotProgress, error) {
	cp, err := decodeSlotCheckpoint(checkpoint)
	out := SlotProgress{Epoch: cp.epoch, Pass: cp.pass, Dirty: cp.dirty, Done: cp.counts.done, Failed: cp.counts.failed,
		Scanned: cp.counts.scanned, Elapsed: cp.counts.elapsed}
	if err != nil || cp.scan == "" {
		return out, err
	}
	if out.Position, err = scan.DecodeCheckpoint(cp.scan); err != nil {
		out.Position = scan.Position{}
	}
	return out, err
}
