package worker

import "github.com/dynapart/dynapart/scan"

// tableShare is what a follower reads after the stream lost records after a shard's checkpoint
// (older than its retention, see followStream): the whole table, not the slot's share, because a
// shard holds the records of every share and the other slots' readers never meet the loss. Read
// as one slot of a one-slot plan over the group's segments, it renews every finished item whose
// content changed since its version was recorded (renewIfChanged) and handles it. Its position is
// not kept: the slot's checkpoint says rescanMark, and a holder that takes the slot over scans the
// whole table again from its start (slot.start), as `dynapart status` shows.
type tableShare struct{}

// rescanMark is the scan position of a slot checkpoint whose holder rescans the whole table
// because the stream may have lost records (tableShare).
const rescanMark = "rescan"

func (tableShare) scanConfig(_ *pass, cfg *scan.Config) {
	cfg.Plan.Slots, cfg.Slot, cfg.Resume = 1, 0, ""
}

func (tableShare) save(p *pass, cp slotCheckpoint) error {
	cp.scan = rescanMark
	return p.saveCheckpoint(cp.encode())
}

func (tableShare) position(pos string) string       { return pos }
func (tableShare) whole() bool                      { return true }
func (tableShare) settle(*pass, bool) (bool, error) { return false, nil }
