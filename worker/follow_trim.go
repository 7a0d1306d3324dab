package worker

import (
	"context"
	"errors"
	"fmt"
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
	if errors.As(err, &te) && te.Shard == "" && !errors.Is(err, errGroupBehind) {
		s.refreshStream() // the stream ended
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

// nextPass is the checkpoint the slot's next pass starts from, after a dirty one: it needs the
// stream's records from when the dirty pass began (the table ledger's plain pass renews no item
// changed since), and a rescan's next pass is a rescan too, and says so on the lease.
func (s *slot) nextPass() slotCheckpoint {
	cp := s.cp.next(s.lease.Token())
	cp.counts.since = s.cp.counts.since
	if s.rescan {
		cp.scan = rescanMark
	}
	return cp
}

// keepFollowing saves, every readThroughEvery until stop is closed, how far the group has read
// the stream, and returns the last: the follow checkpoint cp's since becomes the creation time of
// the group's oldest unread record (follow.Reader.ReadThrough), or stays the start of the pass the
// slot followed from while that is later (records before it are that pass's). Every record the
// group needs that was created before since is read, so a holder that takes the slot later judges
// by it whether the stream may have dropped records nobody read (judgeDowntime), however many
// generations of shards closed and went since, which neither its own take nor a parent's lease
// can hide. A group behind by possibleLoss ends the slot's following with a *follow.TrimmedError:
// the slot rescans the table. It also saves, every CheckpointInterval while they change and when
// stopped, the slot's done and failed counts with the items the stream brought (followedCounts),
// so that `dynapart status` counts them.
func (s *slot) keepFollowing(p *pass, r *follow.Reader, cp slotCheckpoint, stop <-chan struct{}) keptFollowing {
	if cp.counts.since.IsZero() {
		cp.counts.since = s.lease.PreviousExpiry() // as judgeDowntime judged it
	}
	base, saved := cp.counts, cp
	save := func() {
		cp.counts = followedCounts(base, cp.counts.since, p)
		if cp != saved && s.saveCheckpoint(cp.encode()) == nil { // a failed save: an older since
			saved = cp
		}
	}
	for {
		select {
		case <-stop:
			save()
			return keptFollowing{base: base, counts: cp.counts}
		case <-s.w.cfg.Clock.After(min(s.untilReadThrough(), s.w.cfg.CheckpointInterval)):
		}
		if s.untilReadThrough() > 0 {
			save()
			continue
		}
		s.throughAt = s.w.cfg.Clock.Now()
		// Judged before since moves: a shard the stream dropped since the last look, unread, is no
		// longer listed, and the look does not show it.
		if behind := s.throughAt.Sub(cp.counts.since); !cp.counts.since.IsZero() && behind >= possibleLoss() {
			te := &follow.TrimmedError{Err: errGroupBehind, Reason: fmt.Sprintf(
				"the group has records from %s ago not yet read, and the stream keeps records %s", behind.Round(time.Second), follow.Retention)}
			p.endFetch(te)
			return keptFollowing{base: base, counts: followedCounts(base, cp.counts.since, p), behind: te}
		}
		if through, err := s.readThrough(p, r); err == nil && through.After(cp.counts.since) {
			cp.counts.since = through.Truncate(time.Millisecond)
		}
		save()
	}
}

// followedCounts are the slot's counts base with what the following pass p moved to done and
// failed, and since.
func followedCounts(base slotCounts, since time.Time, p *pass) slotCounts {
	base.done += p.counts.done.Load()
	base.failed += p.counts.failed.Load()
	base.since = since
	return base
}

// keptFollowing is how keepFollowing ended: the slot's counts before the following pass (base)
// and at the end (with the last since), and the group found behind by the retention (nil when it
// was not). Found behind, keepFollowing returns while handlers still run: the caller counts again
// (final) once they are done.
type keptFollowing struct {
	base, counts slotCounts
	behind       error
}

// final are the slot's counts once the following pass p's handlers are done: what they moved to
// done and failed after keepFollowing returned counts too (helper-81: found behind, the handlers
// in flight finished later and their items were never counted).
func (k keptFollowing) final(p *pass) slotCounts { return followedCounts(k.base, k.counts.since, p) }

// untilReadThrough is the wait before keepFollowing's next look at how far the group has read:
// readThroughEvery after the last (or after the slot's first reader started), also when the
// slot's reader started again since (a reader that starts again more often is judged all the
// same).
func (s *slot) untilReadThrough() time.Duration {
	return max(s.throughAt.Add(readThroughEvery()).Sub(s.w.cfg.Clock.Now()), 0)
}

// readThrough is how far the group has read the stream (follow.Reader.ReadThrough); an error when
// it could not be read, which leaves since where it was.
func (s *slot) readThrough(p *pass, r *follow.Reader) (time.Time, error) {
	ctx, cancel := context.WithTimeout(p.fetchCtx, readThroughTimeout)
	defer cancel()
	t, err := r.ReadThrough(ctx)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("dynapart: reading how far the group has read the stream failed; trying again later", "err", err)
	}
	return t, err
}

// errGroupBehind is behind the *follow.TrimmedError of a follower whose group has not read
// records older than possibleLoss (keepFollowing): the stream may drop them unread.
var errGroupBehind = errors.New("dynapart: the group is further behind the stream than it keeps records")

// readThroughEvery is how often keepFollowing reads how far the group has read the stream: every
// possibleLoss/48 (29 minutes), so that a group falling behind is found behind by possibleLoss
// well within the hour possibleLoss leaves for clock skew before the stream may drop what it has
// not read (and the shard holding it would no longer be listed).
func readThroughEvery() time.Duration { return possibleLoss() / 48 }

// readThroughTimeout bounds one follow.Reader.ReadThrough.
const readThroughTimeout = time.Minute

// testRetention, when set (nanoseconds), stands for the stream's retention in tests.
var testRetention atomic.Int64

// possibleLoss is how long after a change a follower takes its record to be possibly lost
// (follow.SafeAge of the stream's retention).
func possibleLoss() time.Duration {
	r := follow.Retention
	if t := testRetention.Load(); t > 0 {
		r = time.Duration(t)
	}
	return follow.SafeAge(r)
}

// outlivedRetention reports whether the stream may have lost records the slot needs, judged by
// time where no checkpoint can tell: since from (the start of the pass that just completed, how
// far the group had read the stream, or the last time the slot's previous holder was alive), more
// than possibleLoss has passed, or the stream the slot follows was turned on after from (by the
// holders' clocks): it holds no record of a change made before. Then it starts a rescan (logged,
// counted as one); an error when the rescan could not be saved.
func (s *slot) outlivedRetention(from time.Time, what string) (bool, error) {
	began := s.e.began()
	switch {
	case from.IsZero():
		return false, nil
	case s.w.cfg.Clock.Now().Sub(from) >= possibleLoss():
		s.log.Warn("dynapart: "+what+" longer ago than the stream keeps records: changes made since may be lost from it; scanning the whole table again for items whose content changed",
			"since", from, "retention", follow.Retention)
	case from.Before(began):
		// The stream was turned on later (turned off and on while the group was down, or first
		// turned on during a pass a worker without Follow began): it holds no change made before.
		s.log.Warn("dynapart: "+what+" before the stream the slot follows was turned on: changes made before it are in no stream; scanning the whole table again for items whose content changed",
			"since", from, "stream_began", began)
	default:
		return false, nil
	}
	if !s.startRescan() {
		return false, errRescanNotSaved
	}
	return true, nil
}

// errRescanNotSaved: a rescan judged necessary could not be recorded on the lease.
var errRescanNotSaved = errors.New("dynapart: the slot's rescan could not be saved on its lease")

// groupRescans reads, for a slot taken under a new plan (replan.go), what the group's slot
// checkpoints since its last reset (own's included) say of the stream: whether one was rescanning
// the table (rescanMark), and the earliest since (a pass's start, or how far the group had read
// the stream while a holder followed it). Its holder rescans too, and judges its pass from that
// since, so a resize drops neither a rescan, nor a long pass's start, nor a group's downtime,
// which nothing else would bring back. A slot's new holder that overwrote such a checkpoint
// carried both.
func (s *slot) groupRescans(own slotCheckpoint) (rescan bool, since time.Time, err error) {
	if !s.w.cfg.Follow {
		return false, time.Time{}, nil
	}
	st, err := s.e.locks.GroupStatus(s.ctx, s.w.cfg.Group)
	if err != nil {
		return false, time.Time{}, err
	}
	cps := []slotCheckpoint{own}
	for _, sl := range st.Slots {
		cp, err := decodeSlotCheckpoint(sl.Checkpoint)
		if err != nil || cp.epoch < st.ResetEpoch {
			continue
		}
		if cp.scan == followMark && cp.counts.since.IsZero() {
			cp.counts.since = sl.ExpiresAt // saved before since was: its holder was last alive then
		}
		cps = append(cps, cp)
	}
	for _, cp := range cps {
		rescan = rescan || cp.scan == rescanMark
		if !cp.counts.since.IsZero() && (since.IsZero() || cp.counts.since.Before(since)) {
			since = cp.counts.since // a pass's start, or how far the group had read the stream
		}
	}
	return rescan, since, nil
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
		s.e.streamARN, s.e.streamBegan = arn, streamBegan(d)
	}
}

// judgeDowntime rescans, for a slot taken while its holders followed the stream, when the stream
// may have dropped records the group had not read (a group down, or behind, that long, whose
// shards have closed and gone with their records: run.parentGone sees one generation only). The
// checkpoint says how far the group had read the stream (keepFollowing; this take changed only
// the lease's expiry); one saved before it did, the previous holder's expiry. false when the
// rescan could not be saved.
func (s *slot) judgeDowntime() bool {
	if !s.follows() {
		return true
	}
	since := s.cp.counts.since
	if since.IsZero() {
		since = s.lease.PreviousExpiry()
	}
	_, err := s.outlivedRetention(since, "the group last read the stream's records up to a time")
	return err == nil
}

// afterCleanPass moves a follower whose pass was clean to the stream, or, when the pass (or its
// first dirty predecessor) began longer ago than the stream keeps records, to a rescan. false when
// the checkpoint that says so could not be saved.
func (s *slot) afterCleanPass() bool {
	since := s.cp.counts.since
	rescan, err := s.outlivedRetention(since, "the pass that just completed (or its first dirty predecessor) began")
	if err != nil || rescan {
		return err == nil
	}
	s.cp = s.cp.next(s.lease.Token())
	s.cp.counts.since = since // records since the pass began are the stream's to bring
	return s.startFollowing() == nil
}
