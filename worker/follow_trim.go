package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/dynapart/dynapart/follow"
)

// trimmed handles a stream that lost records the slot's readers had not read (err wraps a
// *follow.TrimmedError): the slot's next pass scans the whole table again, renewing every item
// whose content changed (slot.rescan). Rescans are at least PollInterval apart: a stream that is
// turned off or deleted ends every reader at once, and the slot then works as a worker that
// rescans every PollInterval does, until the table streams again (a stream turned on again has a
// new ARN, which the slot learns here).
func (s *slot) trimmed(err error) {
	c := s.w.cfg
	s.log.Warn("dynapart: the stream no longer holds records the group has not read (a checkpoint older than its retention, or the stream turned off): scanning the whole table again for items whose content changed", "err", err)
	var te *follow.TrimmedError
	if errors.As(err, &te) && te.Shard == "" {
		s.refreshStream()
	}
	if !s.lastTrim.IsZero() {
		if wait := s.lastTrim.Add(c.PollInterval).Sub(c.Clock.Now()); wait > 0 && !s.wait(wait) {
			return
		}
	}
	s.lastTrim = c.Clock.Now()
	s.startRescan() // not saved: the slot stops, or its reader meets the loss again
}

// startRescan makes the slot's next pass a rescan of the whole table that renews every item whose
// content changed (slot.rescan). It covers every change made before it starts: a reader after it
// may read trimmed shards from their oldest record (follow.ReaderConfig.Rescanned). It is saved on
// the lease first: the slot's checkpoint says rescanMark until the rescan is clean and the slot
// follows again, so that whoever holds the slot next rescans too (slot.start), since a loss judged
// by time leaves no other trace. false when that save failed (the lease lost, DynamoDB out of
// reach): nothing changed, and the slot stops or meets the loss again.
func (s *slot) startRescan() bool {
	from := s.w.cfg.Clock.Now()
	cp := s.cp.next(s.lease.Token())
	cp.scan = rescanMark
	if err := s.saveCheckpoint(cp.encode()); err != nil {
		return false
	}
	s.w.stats.followRescans.Add(1)
	s.rescan, s.rescanFrom, s.cp = true, from, cp
	return true
}

// nextPass is the checkpoint the slot's next pass starts from: a rescan's next pass (after a dirty
// one) is a rescan too, and says so on the lease.
func (s *slot) nextPass() slotCheckpoint {
	cp := s.cp.next(s.lease.Token())
	if s.rescan {
		cp.scan = rescanMark
	}
	return cp
}

// testRetention, when set (nanoseconds), stands for the stream's retention in tests.
var testRetention atomic.Int64

// possibleLoss is how long after a change a follower takes its record to be possibly lost: the
// stream's retention less a margin (an hour of 24) for the skew between the worker's clock and
// DynamoDB's and for the time a reader takes to start.
func possibleLoss() time.Duration {
	r := follow.Retention
	if t := testRetention.Load(); t > 0 {
		r = time.Duration(t)
	}
	return r - r/24
}

// outlivedRetention reports whether the stream may have lost records the slot needs, judged by
// time where no checkpoint can tell: since from (the start of the pass that just completed, or
// the last time the slot's previous holder was alive), more than possibleLoss has passed. Then it
// starts a rescan (logged, counted as one); an error when the rescan could not be saved.
func (s *slot) outlivedRetention(from time.Time, what string) (bool, error) {
	if from.IsZero() || s.w.cfg.Clock.Now().Sub(from) < possibleLoss() {
		return false, nil
	}
	s.log.Warn("dynapart: "+what+" longer ago than the stream keeps records: changes made since may be lost from it; scanning the whole table again for items whose content changed",
		"since", from, "retention", follow.Retention)
	if !s.startRescan() {
		return false, errRescanNotSaved
	}
	return true, nil
}

// errRescanNotSaved: a rescan judged necessary could not be recorded on the lease.
var errRescanNotSaved = errors.New("dynapart: the slot's rescan could not be saved on its lease")

// groupRescans reports whether the group's old plan was rescanning the table (a slot checkpoint
// since the group's last reset says rescanMark, own's included), for a slot taken under a new
// plan (replan.go): its holder rescans, so a resize does not drop a rescan that nothing else
// would bring back. A slot's new holder that overwrote such a checkpoint carried the mark.
func (s *slot) groupRescans(own slotCheckpoint) (bool, error) {
	if !s.w.cfg.Follow || own.scan == rescanMark {
		return s.w.cfg.Follow, nil
	}
	st, err := s.e.locks.GroupStatus(s.ctx, s.w.cfg.Group)
	if err != nil {
		return false, err
	}
	for _, sl := range st.Slots {
		if cp, err := decodeSlotCheckpoint(sl.Checkpoint); err == nil && cp.scan == rescanMark && cp.epoch >= st.ResetEpoch {
			return true, nil
		}
	}
	return false, nil
}

// refreshStream describes the table again after its stream ended: a stream turned on again (a new
// ARN) is the one the slot follows from now on; none (or one of another view type) is logged, and
// the slot rescans until there is one.
func (s *slot) refreshStream() {
	c := s.w.cfg
	ctx, cancel := context.WithTimeout(s.ctx, c.WriteTimeout)
	defer cancel()
	d, err := describeTable(ctx, c.Client, c.Table, "Table")
	var arn string
	if err == nil {
		arn, err = followedStream(c.Table, d)
	}
	if err != nil {
		s.log.Error("dynapart: the table has no stream to follow: rescanning every PollInterval until it has (dynapart init --table T --stream)", "err", err)
		return
	}
	s.e.streamMu.Lock()
	defer s.e.streamMu.Unlock()
	if arn != s.e.streamARN {
		s.log.Warn("dynapart: the table streams to a new stream: following it", "old", s.e.streamARN, "new", arn)
		s.e.streamARN = arn
	}
}
