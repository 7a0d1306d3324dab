package worker

import "github.com/dynapart/dynapart/scan"

// SlotProgress is a slot's checkpoint read back for people (dynapart status): which pass the slot
// is in and how far its scan got.
type SlotProgress struct {
	Pass     int           // passes over the share completed before this one
	Dirty    bool          // this pass met items that need another pass (retries, claims elsewhere)
	Position scan.Position // the scan position; no Cursors before the first checkpoint
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

// ParseSlotProgress decodes a slot checkpoint as the worker writes it ("" is a slot that has not
// checkpointed yet).
func ParseSlotProgress(checkpoint string) (SlotProgress, error) {
	cp, err := decodeSlotCheckpoint(checkpoint)
	if err != nil || cp.scan == "" {
		return SlotProgress{Pass: cp.pass, Dirty: cp.dirty}, err
	}
	pos, err := scan.DecodeCheckpoint(cp.scan)
	if err != nil {
		return SlotProgress{Pass: cp.pass, Dirty: cp.dirty}, err
	}
	return SlotProgress{Pass: cp.pass, Dirty: cp.dirty, Position: pos}, nil
}
