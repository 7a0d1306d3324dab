package worker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// share is what a pass reads and where it saves its position. Work stealing (steal.go) gives a
// pass one of three:
//
//   - wholeShare: the slot's share, its units unmarked (continuous workers, and once-workers of a
//     one-slot plan, which has no thief);
//   - *markedShare: the slot's share, each unit marked for the slot's lease before it is read, so
//     that thieves may take units not started (a once-worker's pass over its own slot);
//   - *unitRun (unitpass.go): some units of a slot's share, whose markers name the pass's lease (a
//     thief's units, or the owner's reading of a unit a thief left).
type share interface {
	// scanConfig sets what the pass's scanner reads.
	scanConfig(p *pass, cfg *scan.Config)
	// save saves the pass's position cp.
	save(p *pass, cp slotCheckpoint) error
	// position is the scan position pos with the units other leases read to their end marked
	// done (the scanner skipped them).
	position(pos string) string
	// whole reports whether the pass reads the slot's own share and no thief took a unit of it,
	// so that a complete pass's checkpoint is the slot's final one.
	whole() bool
	// settle takes in what thieves did with the units they took from the pass, once its scan has
	// ended: complete (read to its end), it waits until every such unit is done; stopped, it takes
	// in those done. It reports whether the pass's position changed.
	settle(p *pass, complete bool) (changed bool, err error)
}

// save saves the pass's position: on the slot's lease, or for a unit pass on its units' markers.
func (p *pass) save(cp slotCheckpoint) error { return p.share.save(p, cp) }

// wholeShare is the slot's share read without markers.
type wholeShare struct{}

func (wholeShare) scanConfig(*pass, *scan.Config) {}
func (wholeShare) save(p *pass, cp slotCheckpoint) error {
	return p.saveCheckpoint(cp.encode())
}
func (wholeShare) position(pos string) string       { return pos }
func (wholeShare) whole() bool                      { return true }
func (wholeShare) settle(*pass, bool) (bool, error) { return false, nil }

// markedShare is the owner's side of work stealing in a once-worker's pass over its own slot: the
// pass's unit markers, the units its scanner skipped because a thief holds them, and the units
// other leases read to their end.
type markedShare struct {
	marks markerSet

	mu     sync.Mutex
	stolen []int        // units a thief held when the scanner came to them
	done   map[int]bool // units other leases read to their end, taken in (see unitDone)
}

func (m *markedShare) scanConfig(p *pass, cfg *scan.Config) {
	cfg.BeforeSegment = func(ctx context.Context, unit int) (bool, error) { return m.beforeUnit(p, unit) }
}

func (m *markedShare) save(p *pass, cp slotCheckpoint) error { return p.saveCheckpoint(cp.encode()) }

func (m *markedShare) whole() bool { return len(m.stolenUnits()) == 0 }

func (m *markedShare) settle(p *pass, complete bool) (bool, error) {
	switch {
	case !complete:
		return m.takeStolenDone(p), nil
	case len(m.stolenUnits()) == 0:
		return false, nil
	}
	return true, m.reconcile(p)
}

// beforeUnit is the scanner's BeforeSegment in a once-worker's pass: it marks the unit for the
// slot's lease, and skips units a thief holds (reconcile waits for them) or that are done.
func (m *markedShare) beforeUnit(p *pass, unit int) (bool, error) {
	wctx, cancel := p.writeContext()
	defer cancel()
	taken, cur, err := p.lease.MarkUnit(wctx, m.marks, unit)
	switch {
	case err != nil:
		return false, err
	case taken, cur.HeldBy(p.lease) && !cur.Done:
		return true, nil
	case cur.Done:
		// Read to its end by a thief (or by this slot's earlier holder after a thief died).
		m.unitDone(p, cur)
		return false, nil
	case cur.Slot == p.lease.Slot() && cur.Token < p.lease.Token():
		// An earlier holder of this slot (ended) was reading it: resume it from the checkpoint.
		ok, err := p.lease.TakeOverUnit(wctx, m.marks, cur)
		if err == nil && !ok {
			err = errors.New("dynapart: a unit marker of this slot changed under its holder")
		}
		return ok, err
	}
	m.mu.Lock()
	m.stolen = append(m.stolen, unit)
	m.mu.Unlock()
	return false, nil
}

// markDone records that unit is done; it reports whether it was already.
func (m *markedShare) markDone(unit int) (seen bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen = m.done[unit]
	if m.done == nil {
		m.done = map[int]bool{}
	}
	m.done[unit] = true
	return seen
}

// unitDone takes in, once, a unit another lease read to its end: its dirty, the thief's counts,
// and the unit done in the slot's checkpoint.
func (m *markedShare) unitDone(p *pass, mk lock.UnitMarker) {
	if m.markDone(mk.Unit) {
		return
	}
	if mk.Dirty {
		p.dirtyUnkeyed() // a thief's items
	}
	p.counts.done.Add(mk.Thief.Done)
	p.counts.failed.Add(mk.Thief.Failed)
	p.counts.scanned.Add(mk.Thief.Scanned)
}

// takeStolenDone reads the markers of the units thieves took from a pass that stopped, and takes
// in those done (see unitDone); it reports whether there were any.
func (m *markedShare) takeStolenDone(p *pass) bool {
	stolen := m.stolenUnits()
	if len(stolen) == 0 {
		return false
	}
	wctx, cancel := p.markerWriteContext()
	defer cancel()
	ms, err := p.e.locks.UnitMarkers(wctx, m.marks)
	if err != nil {
		return false
	}
	found := false
	for _, u := range stolen {
		if mk, ok := ms[u]; ok && mk.Done {
			m.unitDone(p, mk)
			found = true
		}
	}
	return found
}

func (m *markedShare) position(pos string) string {
	m.mu.Lock()
	done := maps.Clone(m.done)
	m.mu.Unlock()
	if len(done) == 0 || pos == "" {
		return pos
	}
	dp, err := scan.DecodeCheckpoint(pos)
	if err != nil {
		return pos
	}
	for i, c := range dp.Cursors {
		if done[c.Segment] {
			dp.Cursors[i] = scan.Cursor{TotalSegments: c.TotalSegments, Segment: c.Segment, Done: true}
		}
	}
	out, err := scan.EncodeCheckpoint(dp)
	if err != nil {
		return pos
	}
	return out
}

func (m *markedShare) stolenUnits() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.stolen)
}

// reconcile waits until every unit a thief took from this pass is done, reading itself the units
// of thieves whose lease ended (see the top of steal.go).
func (m *markedShare) reconcile(p *pass) error {
	c := p.w.cfg
	pending := m.stolenUnits()
	for {
		ms, err := p.e.locks.UnitMarkers(p.fetchCtx, m.marks)
		if err != nil {
			return err
		}
		var st *lock.GroupStatus
		var left []int
		for _, u := range pending {
			mk, ok := ms[u]
			switch {
			case !ok:
				return errors.New("dynapart: a unit a thief took has no marker")
			case mk.Done:
				m.unitDone(p, mk)
				continue
			case !mk.HeldBy(p.lease):
				if st == nil {
					if st, err = p.e.locks.GroupStatus(p.fetchCtx, c.Group); err != nil {
						return err
					}
				}
				if markerLive(mk, st) {
					left = append(left, u)
					continue
				}
				if took, err := p.lease.TakeOverUnit(p.fetchCtx, m.marks, mk); err != nil || !took {
					left = append(left, u) // changed meanwhile: look again
					continue
				}
			}
			c.Logger.Info("dynapart: reading a unit a thief left unfinished", "slot", p.lease.Slot(), "unit", u)
			if err := m.readOwnUnit(p, mk); err != nil {
				return err
			}
		}
		if len(left) == 0 {
			return nil
		}
		pending = left
		select {
		case <-p.fetchCtx.Done():
			return p.fetchCtx.Err()
		case <-c.Clock.After(c.StandbyPoll):
		}
	}
}

// markerLive reports whether the lease a marker names is still held (by the lock's rules).
func markerLive(m lock.UnitMarker, st *lock.GroupStatus) bool {
	if m.Slot < 0 || m.Slot >= len(st.Slots) {
		return false
	}
	s := st.Slots[m.Slot]
	return s.Token == m.Token && s.Held
}

// readOwnUnit reads unit mk.Unit of the pass's own slot from the marker's cursor (the owner's
// reading of a unit a thief left) and marks it done; its counts and dirty join the pass's.
func (m *markedShare) readOwnUnit(p *pass, mk lock.UnitMarker) error {
	u := newUnitRun(m.marks, p.lease.Slot(), []int{mk.Unit})
	u.plan, u.of, u.cursor = p.plan, p.from, mk.Cursor
	res, err := p.runUnitPass(u)
	p.counts.scanned.Add(res.cp.counts.scanned)
	p.counts.done.Add(res.cp.counts.done)
	p.counts.failed.Add(res.cp.counts.failed)
	if err != nil {
		return err
	}
	if res.cp.dirty {
		p.dirtyUnkeyed() // the unit pass's items
	}
	m.markDone(mk.Unit) // counted above
	return nil
}
