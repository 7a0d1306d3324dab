package worker

import "github.com/dynapart/dynapart/lock"

// markerSet names the unit markers of one pass of one slot (see steal.go for what they are for).
// Package lock stores them: lock.UnitPass names them, lock.Client.UnitMarkers reads them, and a
// lease writes them (lock.Lease.MarkUnit, TakeOverUnit, SaveUnitCursor, FinishUnit).
type markerSet = lock.UnitPass

// markerSet returns the markers of pass (started by the holder of token run) of slot under the
// plan epoch.
func (w *Worker) markerSet(epoch int64, slot, pass int, run int64) markerSet {
	return markerSet{Group: w.cfg.Group, Epoch: epoch, Slot: slot, Pass: pass, Run: run}
}
