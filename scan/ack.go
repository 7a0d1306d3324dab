package scan

import (
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Acknowledgements and the position: a page is behind a segment's position once every item of it
// is acknowledged, and the checkpoint is the position of every segment.

// pageState is a page read and not yet behind its segment's position.
type pageState struct {
	s       *Scanner
	st      *stream
	end     map[string]types.AttributeValue // LastEvaluatedKey; nil: the segment's last page
	unacked atomic.Int64
}

// Item is one item of a Page. The consumer calls Ack when it is finished with the item (processed
// or deliberately skipped); the checkpoint passes a page only when all its items are acknowledged.
type Item struct {
	Attrs map[string]types.AttributeValue
	page  *pageState
	acked atomic.Bool
	onAck func() // an item made by NewItem
}

// NewItem is an item of another source than a Scanner (a worker following the table's stream
// hands its records' items to the same handlers): Ack calls onAck once (nil: nothing).
func NewItem(attrs map[string]types.AttributeValue, onAck func()) *Item {
	return &Item{Attrs: attrs, onAck: onAck}
}

// Ack marks the item finished. It is idempotent and safe from any goroutine, also after Run has
// returned (the position keeps advancing, so a final Checkpoint covers late acknowledgements).
func (i *Item) Ack() {
	if !i.acked.CompareAndSwap(false, true) {
		return
	}
	if i.page == nil {
		if i.onAck != nil {
			i.onAck()
		}
		return
	}
	if i.page.unacked.Add(-1) == 0 {
		i.page.s.pageAcked(i.page)
	}
}

// Checkpoint encodes the position reached by acknowledgements: for each segment, the start of its
// first page that is not fully acknowledged. A scanner resumed from it reads again every page that
// still had an unacknowledged item (and so also that page's acknowledged items), and nothing
// before. It is safe to call at any time, also after Run.
func (s *Scanner) Checkpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkpointLocked()
}

func (s *Scanner) checkpointLocked() string {
	p := Position{Table: s.cfg.Table, Mode: s.plan.Mode, TotalSegments: s.total, Cursors: make([]Cursor, len(s.streams))}
	if s.plan.Mode == ModeIndex {
		p.Index = s.cfg.IndexName
	}
	for i, st := range s.streams {
		p.Cursors[i] = Cursor{TotalSegments: s.total, Segment: st.seg, LastEvaluatedKey: st.acked, Done: st.done}
	}
	cp, err := EncodeCheckpoint(p)
	if err != nil {
		return "" // keys are always S, N or B, so this cannot happen
	}
	return cp
}

// pageAcked runs once per page, when its last item is acknowledged (or at once for a page with
// none): it frees the page's backpressure slot and moves the segment's position past every
// leading fully acknowledged page.
func (s *Scanner) pageAcked(p *pageState) {
	<-s.sem
	st := p.st
	s.mu.Lock()
	moved := false
	for len(st.pending) > 0 && st.pending[0].unacked.Load() == 0 {
		head := st.pending[0]
		st.pending[0] = nil
		st.pending = st.pending[1:]
		if len(head.end) == 0 {
			st.acked, st.done = nil, true
		} else {
			st.acked = head.end
		}
		moved = true
	}
	if !moved || s.cfg.OnCheckpoint == nil {
		s.mu.Unlock()
		return
	}
	s.version++
	v, cp := s.version, s.checkpointLocked()
	s.mu.Unlock()

	s.cbMu.Lock()
	defer s.cbMu.Unlock()
	if v > s.cbVersion { // a later position may have been reported already
		s.cbVersion = v
		s.cfg.OnCheckpoint(cp)
	}
}
