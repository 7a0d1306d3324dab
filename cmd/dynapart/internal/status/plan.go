package status

import (
	"fmt"
	"strings"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// groupPlan is a group's current plan as status shows it: which scan units (segments, or shards
// in index mode) each slot owns under its n, read from the meta item.
type groupPlan struct {
	mode  scan.Mode
	n     int
	total int // segments (segment and filter mode) or shards (index mode); 0 when unknown
}

func planOf(st *lock.GroupStatus) groupPlan {
	p := groupPlan{mode: scan.Mode(st.Meta["mode"]), n: st.N}
	if p.mode == "" {
		p.mode = scan.ModeSegment
	}
	p.total, _ = worker.GroupUnits(lock.GroupState{Exists: true, N: st.N, Meta: st.Meta})
	return p
}

// units says which units slot owns, as ranges ("0-11", "3,7,11"); "" for a slot beyond n (retired by
// a scale-down) or an unknown plan, "all" in filter mode (every slot reads every segment).
func (p groupPlan) units(slot int) string {
	if slot >= p.n || p.n < 1 || p.total < 1 {
		return ""
	}
	var us []int
	switch p.mode {
	case scan.ModeFilter:
		return "all"
	case scan.ModeIndex:
		for s := slot; s < p.total; s += p.n {
			us = append(us, s)
		}
	default:
		us = scan.Plan{Mode: scan.ModeSegment, Slots: p.n, SubSegments: 1, Total: p.total}.Segments(slot)
	}
	return compactRanges(us)
}

// compactRanges writes sorted ints as ranges: 0-3,7,9-10.
func compactRanges(xs []int) string {
	var b strings.Builder
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", xs[i], xs[j])
		} else {
			fmt.Fprintf(&b, "%d", xs[i])
		}
		i = j + 1
	}
	return b.String()
}
