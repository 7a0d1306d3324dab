package scan

import (
	"errors"
	"fmt"

	"github.com/dynapart/dynapart/lock"
)

// Mode is how a slot finds its share of the table.
type Mode string

const (
	// ModeSegment gives each slot its own parallel-scan segments: every item is read once by the
	// whole fleet, so it is the cheapest mode. The split follows DynamoDB's hash of the key, so
	// changing the number of slots moves items between slots.
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
// fleet; a checkpoint records TotalSegments so that a change is detected rather than overlapped.
type Plan struct {
	// Mode defaults to ModeSegment.
	Mode Mode
	// Slots is the number of workers sharing the table (N). Required, at least 1.
	Slots int
	// SubSegments is the number of scan segments per slot, which are read in parallel (in filter
	// and index mode: the number of requests in flight). More sub-segments read faster and make
	// checkpoints finer. Defaults to 4.
	SubSegments int
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

// TotalSegments is the TotalSegments of the parallel scan: Slots*SubSegments in segment and filter
// mode (filter mode splits the whole table the same way, for parallelism and checkpoints), and 0 in
// index mode, which queries Config.Shards shards instead of scanning.
func (p Plan) TotalSegments() int {
	p = p.withDefaults()
	if p.Mode == ModeIndex {
		return 0
	}
	return p.Slots * p.SubSegments
}

// Segments returns the scan segments slot reads: in segment mode its own SubSegments consecutive
// segments (slot*SubSegments up to slot*SubSegments+SubSegments-1), in filter mode every segment
// (the slot keeps only its items from each), in index mode none (see Config.Shards). An invalid plan or
// slot has no segments.
func (p Plan) Segments(slot int) []int {
	p = p.withDefaults()
	if p.Validate() != nil || slot < 0 || slot >= p.Slots {
		return nil
	}
	var out []int
	switch p.Mode {
	case ModeSegment:
		out = make([]int, p.SubSegments)
		for i := range out {
			out[i] = slot*p.SubSegments + i
		}
	case ModeFilter:
		out = make([]int, p.TotalSegments())
		for i := range out {
			out[i] = i
		}
	}
	return out
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
	if p.Mode != ModeIndex && p.Slots > maxTotalSegments/p.SubSegments {
		return &ConfigError{Pkg: "scan", Field: "Plan.SubSegments", Reason: fmt.Sprintf("Slots*SubSegments must be at most %d", maxTotalSegments)}
	}
	return nil
}

// ConfigError is a configuration that cannot work; Field names the offending field. It is
// lock.ConfigError (Pkg "scan"), the one configuration error shape of dynapart.
type ConfigError = lock.ConfigError

var (
	// ErrCheckpointMismatch: a checkpoint was made for another table, index, mode, slot or
	// TotalSegments, so its cursors would skip or repeat the wrong items.
	ErrCheckpointMismatch = errors.New("scan: checkpoint does not match this scan")
	// ErrBadCheckpoint: a checkpoint cannot be decoded.
	ErrBadCheckpoint = errors.New("scan: malformed checkpoint")
)
