package scan_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/scan"
)

// TestPlanTotalKeepsTheOldLayout: Total = Slots*SubSegments (and Total 0) give every slot the
// segments the rule before Total gave it, slot*SubSegments up to slot*SubSegments+SubSegments-1.
func TestPlanTotalKeepsTheOldLayout(t *testing.T) {
	for slots := 1; slots <= 40; slots++ {
		for sub := 1; sub <= 9; sub++ {
			old := scan.Plan{Mode: scan.ModeSegment, Slots: slots, SubSegments: sub}
			fixed := old
			fixed.Total = slots * sub
			require.Equal(t, slots*sub, old.TotalSegments())
			require.Equal(t, slots*sub, fixed.TotalSegments())
			for slot := range slots {
				want := make([]int, sub)
				for i := range want {
					want[i] = slot*sub + i
				}
				require.Equal(t, want, old.Segments(slot), "slots %d sub %d slot %d", slots, sub, slot)
				require.Equal(t, want, fixed.Segments(slot), "slots %d sub %d slot %d", slots, sub, slot)
			}
		}
	}
}

// TestPlanSegmentsPartition: for every Slots <= T, the slots' blocks are contiguous, in slot
// order, between floor(T/Slots) and ceil(T/Slots) long, and cover each of the T segments once.
func TestPlanSegmentsPartition(t *testing.T) {
	check := func(total, slots int) {
		p := scan.Plan{Mode: scan.ModeSegment, Slots: slots, SubSegments: 3, Total: total}
		require.NoError(t, p.Validate())
		next := 0
		for slot := range slots {
			segs := p.Segments(slot)
			require.GreaterOrEqual(t, len(segs), total/slots, "T %d slots %d slot %d", total, slots, slot)
			require.LessOrEqual(t, len(segs), (total+slots-1)/slots, "T %d slots %d slot %d", total, slots, slot)
			for _, seg := range segs {
				require.Equal(t, next, seg, "T %d slots %d slot %d", total, slots, slot)
				next++
			}
		}
		require.Equal(t, total, next, "T %d slots %d: every segment owned", total, slots)
		require.Nil(t, p.Segments(slots))
		require.Nil(t, p.Segments(-1))
	}
	for total := 1; total <= 130; total++ {
		for slots := 1; slots <= total; slots++ {
			check(total, slots)
		}
	}
	for _, c := range [][2]int{{1_000_000, 1}, {1_000_000, 7}, {1_000_000, 999}, {999_983, 1000}, {64, 64}} {
		check(c[0], c[1])
	}
}

// TestPlanResizeMovesWholeSegments: under a fixed Total each segment has one owner for every
// Slots, so the owner of a segment after a resize can take its cursor over unchanged.
func TestPlanResizeMovesWholeSegments(t *testing.T) {
	const total = 64
	owner := func(slots int) map[int]int {
		p := scan.Plan{Slots: slots, SubSegments: 4, Total: total}
		out := map[int]int{}
		for slot := range slots {
			for _, seg := range p.Segments(slot) {
				_, dup := out[seg]
				require.False(t, dup)
				out[seg] = slot
			}
		}
		require.Len(t, out, total)
		return out
	}
	two, six := owner(2), owner(6)
	require.Equal(t, 0, two[31])
	require.Equal(t, 1, two[32])
	require.Equal(t, 2, six[31], "floor(2*64/6) = 21 <= 31 < floor(3*64/6) = 32")
	require.Equal(t, 3, six[32])
}

func TestPlanTotalFilterAndIndex(t *testing.T) {
	f := scan.Plan{Mode: scan.ModeFilter, Slots: 5, SubSegments: 2, Total: 3}
	require.NoError(t, f.Validate(), "filter mode: every slot reads every segment, Total may be below Slots")
	require.Equal(t, 3, f.TotalSegments())
	for slot := range 5 {
		require.Equal(t, []int{0, 1, 2}, f.Segments(slot))
	}
	ix := scan.Plan{Mode: scan.ModeIndex, Slots: 5, Total: -3}
	require.NoError(t, ix.Validate(), "index mode ignores Total")
	require.Equal(t, 0, ix.TotalSegments())
	require.Nil(t, ix.Segments(0))
}

func TestPlanValidatesTotal(t *testing.T) {
	for _, p := range []scan.Plan{
		{Mode: scan.ModeSegment, Slots: 9, Total: 8},
		{Mode: scan.ModeSegment, Slots: 1, Total: -1},
		{Mode: scan.ModeSegment, Slots: 1, Total: 1_000_001},
		{Mode: scan.ModeFilter, Slots: 1, Total: -1},
		{Mode: scan.ModeFilter, Slots: 1, Total: 1_000_001},
	} {
		err := p.Validate()
		var ce *scan.ConfigError
		require.ErrorAs(t, err, &ce, "%+v", p)
		require.Equal(t, "Plan.Total", ce.Field, "%+v", p)
		require.Nil(t, p.Segments(0), "an invalid plan has no segments")
		_, err = scan.New(scan.Config{Client: noClient{}, Table: "t", Plan: p})
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "Plan.Total", ce.Field)
	}
	// Slots*SubSegments may exceed the segment limit when Total is set: it no longer matters.
	big := scan.Plan{Slots: 500_000, SubSegments: 4, Total: 1_000_000}
	require.NoError(t, big.Validate())
	require.Equal(t, []int{2, 3}, big.Segments(1))
	require.NoError(t, scan.Plan{Slots: 8, Total: 8}.Validate())
}

func TestDefaultTotal(t *testing.T) {
	for _, c := range []struct{ slots, sub, want int }{
		{1, 1, 64}, {2, 4, 64}, {3, 4, 72}, {5, 4, 80}, {16, 4, 64}, {17, 4, 68}, {7, 3, 84},
		{64, 1, 64}, {100, 4, 400}, {0, 4, 0}, {4, 0, 0}, {1_000_000, 4, 1_000_000}, {250_000, 4, 1_000_000},
	} {
		require.Equal(t, c.want, scan.DefaultTotal(c.slots, c.sub), "DefaultTotal(%d, %d)", c.slots, c.sub)
	}
	for slots := 1; slots <= 70; slots++ {
		for sub := 1; sub <= 8; sub++ {
			got, per := scan.DefaultTotal(slots, sub), slots*sub
			require.Zero(t, got%per)
			require.GreaterOrEqual(t, got, 64)
			require.Less(t, got-per, 64, "smallest multiple: %d for %d x %d", got, slots, sub)
			p := scan.Plan{Slots: slots, SubSegments: sub, Total: got}
			require.NoError(t, p.Validate())
			for k := range slots {
				require.Len(t, p.Segments(k), got/slots, "whole blocks of equal size")
			}
			require.NoError(t, scan.Plan{Slots: 64, SubSegments: sub, Total: got}.Validate(), "room for 64 slots")
		}
	}
}

func TestPositionCursor(t *testing.T) {
	p := scan.Position{Table: "t", Mode: scan.ModeSegment, TotalSegments: 16, Cursors: []scan.Cursor{
		{Segment: 3, Done: true}, {Segment: 9, LastEvaluatedKey: item{"id": s("k")}},
	}}
	c, ok := p.Cursor(9)
	require.True(t, ok)
	require.Equal(t, item{"id": s("k")}, c.LastEvaluatedKey)
	c, ok = p.Cursor(3)
	require.True(t, ok)
	require.True(t, c.Done)
	_, ok = p.Cursor(4)
	require.False(t, ok)
}

// TestResumeComposedPosition: a slot resumes from a position holding cursors for any subset of
// the segments it owns under the new plan, also ones another slot made; one cursor for a segment
// it does not own is refused.
func TestResumeComposedPosition(t *testing.T) {
	plan := scan.Plan{Mode: scan.ModeSegment, Slots: 4, SubSegments: 2, Total: 16} // slot 1: 4..7
	cfg := func(p scan.Position) scan.Config {
		cp, err := scan.EncodeCheckpoint(p)
		require.NoError(t, err)
		return scan.Config{Client: noClient{}, Table: "users", Plan: plan, Slot: 1, Resume: cp}
	}
	pos := func(segs ...int) scan.Position {
		p := scan.Position{Table: "users", Mode: scan.ModeSegment, TotalSegments: 16}
		for _, seg := range segs {
			p.Cursors = append(p.Cursors, scan.Cursor{Segment: seg, LastEvaluatedKey: item{"id": s(fmt.Sprint("k", seg))}})
		}
		return p
	}
	for _, segs := range [][]int{nil, {4}, {7, 5}, {4, 5, 6, 7}} {
		_, err := scan.New(cfg(pos(segs...)))
		require.NoError(t, err, "segments %v", segs)
	}
	for _, segs := range [][]int{{3}, {4, 8}, {15}} {
		_, err := scan.New(cfg(pos(segs...)))
		require.ErrorIs(t, err, scan.ErrCheckpointMismatch, "segments %v", segs)
	}
	wrongTotal := pos(4)
	wrongTotal.TotalSegments = 8 // Slots*SubSegments: the layout without Total
	_, err := scan.New(cfg(wrongTotal))
	require.ErrorIs(t, err, scan.ErrCheckpointMismatch)
	wrongMode := pos(4)
	wrongMode.Mode = scan.ModeFilter
	_, err = scan.New(cfg(wrongMode))
	require.ErrorIs(t, err, scan.ErrCheckpointMismatch)
}

func ExamplePlan_Segments_total() {
	// A group created with 2 slots and Total 16, then scaled to 3: each slot owns a contiguous
	// block of the same 16 segments.
	for _, slots := range []int{2, 3} {
		p := scan.Plan{Mode: scan.ModeSegment, Slots: slots, SubSegments: 4, Total: 16}
		for slot := range slots {
			fmt.Println(slots, slot, p.Segments(slot))
		}
	}
	fmt.Println(scan.DefaultTotal(2, 4), scan.DefaultTotal(3, 4))
	// Output:
	// 2 0 [0 1 2 3 4 5 6 7]
	// 2 1 [8 9 10 11 12 13 14 15]
	// 3 0 [0 1 2 3 4]
	// 3 1 [5 6 7 8 9]
	// 3 2 [10 11 12 13 14 15]
	// 64 72
}
