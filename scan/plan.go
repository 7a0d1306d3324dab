package scan

import (
	"errors"
	"fmt"

	"github.com/dynapart/dynapart/configerr"
)

// Mode is how a slot finds its share of the table.
type Mode string

const (
	// ModeSegment gives each slot its own parallel-scan segments: every item is read once by the
	// whole fleet, so it is the cheapest mode. The split follows DynamoDB's hash of the key, so
	// changing the number of slots moves items between slots; with a fixed Plan.Total it moves
	// whole segments, whose cursors stay valid.
	ModeSegment Mode = "segment"
	// ModeFilter has every slot scan the whole table and keep the items whose PartitionAttr maps
	// to it (see [Partition]). It costs N times the reads of ModeSegment, but the split is a
	// documented function of an attribute the application chooses, so it can be predicted and
	// reproduced outside DynamoDB (`dynapart partition`).
	ModeFilter Mode = "filter"
	// ModeIndex has each slot query its shards of a sparse pending index (see
	// [CreatePendingIndex]): only items still to do are read, which suits a big table with a few
	// pending items.
	ModeIndex Mode = "index"
)

// ParseMode returns the Mode named s; an unknown name is an error.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeSegment, ModeFilter, ModeIndex:
		return m, nil
	}
	return "", fmt.Errorf("scan: unknown mode %q (want %s, %s or %s)", s, ModeSegment, ModeFilter, ModeIndex)
}

// DefaultSubSegments is the default Plan.SubSegments.
const DefaultSubSegments = 4

// maxTotalSegments is DynamoDB's limit on Scan's TotalSegments.
const maxTotalSegments = 1_000_000

// Plan is how a table is split among Slots workers. It must be the same on every worker of a
// fleet; a checkpoint records TotalSegments so that a change of the segments is detected rather
// than overlapped (a change of Slots alone keeps them, see Segments).
type Plan struct {
	// Mode defaults to ModeSegment.
	Mode Mode
	// Slots is the number of workers sharing the table (N). Required, at least 1.
	Slots int
	// SubSegments is the number of scan requests a slot has in flight at once (in segment mode
	// without Total: also the number of segments per slot). More read faster. Defaults to 4.
	SubSegments int
	// Total is the TotalSegments of the parallel scan in segment and filter mode: the number of
	// segments the table is split into, fixed when a group is created and independent of Slots,
	// so that Slots can change while every segment and its cursor stays the same (see Segments).
	// In segment mode it bounds Slots (a slot owns at least one segment). Defaults to 0:
	// Slots*SubSegments, the layout of groups made before Total existed, whose checkpoints stay
	// valid. New groups should use DefaultTotal. Ignored in index mode (Config.Shards plays its
	// part).
	Total int
}

func (p Plan) withDefaults() Plan {
	if p.Mode == "" {
		p.Mode = ModeSegment
	}
	if p.SubSegments == 0 {
		p.SubSegments = DefaultSubSegments
	}
	return p
}

// minDefaultTotal is the number of segments DefaultTotal reaches at least: a group made with it
// can grow to that many slots.
const minDefaultTotal = 64

// DefaultTotal is the default Plan.Total of a new group of slots workers with subSegments
// requests in flight each: the smallest multiple of slots*subSegments that is at least 64, so
// that the group starts with whole blocks of subSegments segments per slot and can later be
// scaled up to 64 slots (or more, when slots*subSegments is larger) without reading anything
// again. It is at most DynamoDB's limit of 1,000,000 segments, and 0 (the old layout) when slots
// or subSegments is below 1.
func DefaultTotal(slots, subSegments int) int {
	if slots < 1 || subSegments < 1 {
		return 0
	}
	if slots > maxTotalSegments/subSegments {
		return maxTotalSegments
	}
	per := slots * subSegments
	return (minDefaultTotal + per - 1) / per * per
}

// TotalSegments is the TotalSegments of the parallel scan: Total, or Slots*SubSegments when Total
// is 0, in segment and filter mode (filter mode splits the whole table the same way, for
// parallelism and checkpoints), and 0 in index mode, which queries Config.Shards shards instead
// of scanning.
func (p Plan) TotalSegments() int {
	p = p.withDefaults()
	switch {
	case p.Mode == ModeIndex:
		return 0
	case p.Total != 0:
		return p.Total
	}
	return p.Slots * p.SubSegments
}

// Segments returns the scan segments slot reads. In segment mode, with T = TotalSegments, slot
// owns the contiguous block [floor(slot*T/Slots), floor((slot+1)*T/Slots)): the blocks cover
// the T segments once for any Slots <= T, and for T = Slots*SubSegments slot owns slot*SubSegments
// up to slot*SubSegments+SubSegments-1. When Slots changes, whole segments move between slots, so a
// segment's cursor stays valid under the new plan. In filter mode every slot reads every segment
// (and keeps only its items from each); in index mode none (see Config.Shards). An invalid plan
// or slot has no segments.
func (p Plan) Segments(slot int) []int {
	p = p.withDefaults()
	if p.Validate() != nil || slot < 0 || slot >= p.Slots {
		return nil
	}
	total := p.TotalSegments()
	var lo, hi int
	switch p.Mode {
	case ModeSegment:
		lo, hi = blockStart(slot, total, p.Slots), blockStart(slot+1, total, p.Slots)
	case ModeFilter:
		lo, hi = 0, total
	default:
		return nil
	}
	out := make([]int, hi-lo)
	for i := range out {
		out[i] = lo + i
	}
	return out
}

// blockStart is floor(slot*total/slots), in 64 bits (slot and total are at most 1,000,000).
func blockStart(slot, total, slots int) int {
	return int(int64(slot) * int64(total) / int64(slots))
}

// Validate reports the first invalid field as a *ConfigError.
func (p Plan) Validate() error {
	p = p.withDefaults()
	if _, err := ParseMode(string(p.Mode)); err != nil {
		return &ConfigError{Pkg: "scan", Field: "Plan.Mode", Reason: err.Error()}
	}
	if p.Slots < 1 {
		return &ConfigError{Pkg: "scan", Field: "Plan.Slots", Reason: fmt.Sprintf("must be at least 1, got %d", p.Slots)}
	}
	if p.SubSegments < 1 || p.SubSegments > maxTotalSegments {
		// In index mode SubSegments is the requests in flight; the bound also keeps New's
		// 2*SubSegments default of MaxUnackedPages from overflowing.
		return &ConfigError{Pkg: "scan", Field: "Plan.SubSegments", Reason: fmt.Sprintf("must be in [1, %d], got %d", maxTotalSegments, p.SubSegments)}
	}
	if p.Mode == ModeIndex {
		return nil
	}
	if p.Total != 0 {
		return p.validateTotal()
	}
	if p.Slots > maxTotalSegments/p.SubSegments {
		return &ConfigError{Pkg: "scan", Field: "Plan.SubSegments", Reason: fmt.Sprintf("Slots*SubSegments must be at most %d", maxTotalSegments)}
	}
	return nil
}

func (p Plan) validateTotal() error {
	switch {
	case p.Total < 1 || p.Total > maxTotalSegments:
		return &ConfigError{Pkg: "scan", Field: "Plan.Total", Reason: fmt.Sprintf("must be in [1, %d] (or 0: Slots*SubSegments), got %d", maxTotalSegments, p.Total)}
	case p.Mode == ModeSegment && p.Slots > p.Total:
		return &ConfigError{Pkg: "scan", Field: "Plan.Total", Reason: fmt.Sprintf(
			"%d slots but %d segments: the group's segment count is fixed when it is created and bounds its slots (a slot without a segment would have nothing to read)", p.Slots, p.Total)}
	}
	return nil
}

// ConfigError is a configuration that cannot work; Field names the offending field. It is
// configerr.Error (Pkg "scan"), the one configuration error shape of dynapart.
type ConfigError = configerr.Error

var (
	// ErrCheckpointMismatch: a checkpoint was made for another table, index, mode or
	// TotalSegments, or has a cursor for a segment (shard) the slot does not own under its plan,
	// so its cursors would skip or repeat the wrong items.
	ErrCheckpointMismatch = errors.New("scan: checkpoint does not match this scan")
	// ErrBadCheckpoint: a checkpoint cannot be decoded.
	ErrBadCheckpoint = errors.New("scan: malformed checkpoint")
)
