package work

import (
	"fmt"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// slotBar is the terminal bar's count: the items done under the lease held now (this slot, this
// token), against the slot's share while the lease's first pass reads it. The worker's own
// counters add up every slot it took (a --once worker takes other free slots after its own,
// and steals; a continuous one rescans), so its total against one slot's share filled the bar
// at the first slot's end and said ETA - from then on. Once the share has been read under the
// lease (a continuous worker's later passes, a --once worker's steals) no share is left to
// measure: the line counts on without a bar or an ETA. A slot taken over mid-pass counts from
// the takeover, so its bar does not fill: the items its last holder did are not this worker's.
// The worker's first lease counts from the worker's start; a later one is seen at the bar's
// first tick under it, so the items done under it before that tick (at most one tick's, 200ms)
// are counted as the worker's earlier ones.
type slotBar struct {
	share int64 // the items of one slot's share (the table's item count / N), or 0 when not known

	slot   int   // the lease counted, -1 before any
	token  int64 // its token
	base   int64 // the worker's Completed when the lease was first seen
	passes int64 // the worker's Passes then
}

func newSlotBar(share int64) *slotBar { return &slotBar{share: share, slot: -1} }

// text is the bar's line for the worker's stats s and its completions per second.
func (b *slotBar) text(s worker.Stats, rate float64) string {
	if s.Slot < 0 {
		return fmt.Sprintf("%-20s %d done %6.0f/s", string(s.State), s.Completed, rate) + b.counts(s)
	}
	if s.Slot != b.slot || s.Token != b.token {
		b.slot, b.token, b.base, b.passes = s.Slot, s.Token, s.Completed, s.Passes
		if s.Leases == 1 {
			b.base, b.passes = 0, 0 // the worker's first lease: everything it did was under it
		}
	}
	label := fmt.Sprintf("slot %d (token %d)", s.Slot, s.Token)
	if s.Paused {
		label += " PAUSED"
	}
	done := s.Completed - b.base
	var line string
	if b.share > 0 && s.Passes == b.passes {
		line = fmt.Sprintf("%-20s ▕%s▏ %d/%d done %6.0f/s ETA %s", label, cli.Bar(done, b.share, 24), done, b.share, rate, cli.ETA(done, b.share, rate))
	} else {
		line = fmt.Sprintf("%-20s %d done in this slot %6.0f/s", label, done, rate)
	}
	if done != s.Completed {
		line += fmt.Sprintf(" (%d in all)", s.Completed)
	}
	return line + b.counts(s)
}

// counts is the worker's retries and dead letters, over every slot it took.
func (b *slotBar) counts(s worker.Stats) string {
	return fmt.Sprintf("  retried %d failed %d%s%s", s.Retried, s.DeadLettered, throttleNote(s), followNote(s.Follow))
}
