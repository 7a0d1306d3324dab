package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
)

// Follow mode (Config.Follow): a continuous worker whose share's pass is complete and clean
// follows the table's stream instead of scanning again. Its slot's checkpoint then holds
// followMark as the scan position, so that the slot's next holder follows too. Each slot holder
// runs a follow.Reader, which leases the stream's shards among the group's workers; every record
// that changes an item's content makes the item a candidate, and a candidate is resolved (see
// follow_resolve.go) when the version of the item's current content is the one its ledger state
// records as handled (done or failed), or the item is gone. A shard's checkpoint moves past a
// batch of records only once every candidate of the batch is resolved, so a reader that dies
// leaves no record behind unresolved.
//
// The pass and the stream may bring the same version: whichever claims it first handles it, and
// the other finds it handled. A pass that handled older content than the item has now leaves the
// newer version to its record. A record whose checkpoint the stream no longer holds (older than its
// 24-hour retention) makes the slot scan the whole table again (every share: a shard holds them all), renewing every item whose content
// changed since it was handled (Stats.Follow.Rescans), and then follow the stream from its oldest
// record.

// followMark is the scan position of a slot checkpoint whose share's pass is complete and whose
// holders follow the stream.
const followMark = "follow"

// follows reports whether the slot's next step is to follow the stream rather than to scan.
func (s *slot) follows() bool { return s.w.cfg.Follow && s.cp.scan == followMark }

// startFollowing saves the checkpoint that says the slot follows the stream from now on.
func (s *slot) startFollowing() error {
	s.cp.scan = followMark
	s.cp.dirty = false
	return s.saveCheckpoint(s.cp.encode())
}

// tail follows the stream until the slot stops (nil) or the stream lost records the slot's
// checkpoints need (a *follow.TrimmedError: the caller rescans the share), which includes a group
// that keepFollowing found behind by the retention, also when the reader failed first.
func (s *slot) tail() (err error) {
	r, err := s.newReader()
	if err != nil {
		return err
	}
	s.rescan = false // the reader restarts trimmed shards; the rescan that allows it is done
	s.w.setReader(r)
	defer s.w.setReader(nil)
	p := s.newPass(s.cp, wholeShare{})
	stop := p.startContexts()
	defer stop()
	if s.throughAt.IsZero() {
		s.throughAt = s.w.cfg.Clock.Now() // the looks' schedule starts with the slot's first reader
	}
	stopKeep, cp := make(chan struct{}), s.cp
	var kept keptFollowing
	done := goDone(func() { kept = s.keepFollowing(p, r, cp, stopKeep) })
	defer func() {
		close(stopKeep)
		<-done
		// With the stream's items; a reader started again judges from how far the group had read.
		s.cp.counts = kept.final(p)
		if kept.behind != nil && !errors.Is(err, follow.ErrTrimmed) {
			err = kept.behind
		}
	}()
	return p.followRecords(r)
}

// newReader is the slot's reader of the stream: after a rescan, one that restarts the trimmed
// shards the rescan covers.
func (s *slot) newReader() (*follow.Reader, error) {
	c := s.w.cfg
	var rescanned time.Time
	if s.rescan {
		rescanned = s.rescanFrom
	}
	return follow.NewReader(follow.ReaderConfig{
		Streams: c.Streams, StreamARN: s.e.stream(), Rescanned: rescanned, Locks: s.e.locks, Group: c.Group,
		PollInterval: c.StreamPoll, Clock: c.Clock, Logger: s.log,
		MaxShards: shardShare(s.plan.Slots),
	})
}

// followRecords runs the reader and the handler pool until the pass's fetch context ends.
func (p *pass) followRecords(r *follow.Reader) error {
	err := p.withHandlers(func() error { return r.Run(p.fetchCtx, p.dispatchRecords) })
	if cause := context.Cause(p.fetchCtx); errors.Is(cause, follow.ErrTrimmed) {
		return cause // the group fell too far behind the stream (keepFollowing)
	}
	if rerr := p.refused(); rerr != nil {
		return rerr // a request refused for good: a failed pass, retried until OutageTimeout
	}
	if p.fetchCtx.Err() != nil && !errors.Is(err, follow.ErrTrimmed) {
		return nil
	}
	return err
}

// dispatchRecords turns a batch of records into candidates and hands them to the handlers; the
// batch is done once every candidate is resolved.
func (p *pass) dispatchRecords(ctx context.Context, b *follow.Batch) error {
	cands := p.candidates(changesOf(b.Records))
	if len(cands) == 0 {
		b.Done()
		return nil
	}
	var left atomic.Int64
	left.Store(int64(len(cands)))
	resolved := func() {
		if left.Add(-1) == 0 {
			b.Done()
		}
	}
	for _, cd := range cands {
		t := task{item: scan.NewItem(cd.image, resolved), key: cd.key, follow: true}
		select {
		case p.tasks <- t:
		case <-ctx.Done():
			return nil // not resolved: the batch stays before the shard's checkpoint
		}
	}
	return nil
}

// candidate is an item a record changed: its key, the record's new image and the index of the
// record among those given.
type candidate struct {
	key   Key
	image map[string]types.AttributeValue
	last  int
}

// candidates are the items whose content the records change, each once, in the order of their
// last record: a later record of the same key supersedes an earlier one, a record whose old and
// new images have the same content (the inline ledger's own writes, a rewrite of the same
// values) is no new version unless it took the item's state away (noNewVersion), and a deleted
// item is not handled.
func (p *pass) candidates(changes []Change) []candidate {
	st := &p.w.stats
	last := map[string]int{}
	var keys []candidate
	for ci, ch := range changes {
		st.followRecords.Add(1)
		if ch.Removed || ch.NewImage == nil {
			st.followDeleted.Add(1)
			continue
		}
		if p.noNewVersion(ch) {
			st.followUnchanged.Add(1)
			continue
		}
		k := ch.Keys
		id := ledger.KeyText(k)
		if i, ok := last[id]; ok {
			st.followSuperseded.Add(1)
			keys[i].key = nil
		}
		last[id] = len(keys)
		keys = append(keys, candidate{key: k, image: ch.NewImage, last: ci})
	}
	out := keys[:0]
	for _, k := range keys {
		if k.key != nil {
			out = append(out, k)
		}
	}
	return out
}

// shardShare is how many shards a slot holder's reader takes while the group's other holders may
// take them: one each in a group of several (a shard nobody takes is taken beyond it, see
// follow.ReaderConfig.MaxShards), every shard in a group of one.
func shardShare(slots int) int {
	if slots > 1 {
		return 1
	}
	return 0
}

// noNewVersion reports a record of an existing item that brings no new version: the ledger's own
// write that finished the item (the inline ledger's state moved to done or failed; content it
// changed is the handler's effects, the output of the version just handled, whatever version the
// write recorded), or a write that left the content as it was. A record that took the item's inline
// state away (its old image has a state, its new image none: the item rewritten whole by a PutItem,
// its state removed by hand, a redrive) brings one even with the same content: the item is pending
// again.
func (p *pass) noNewVersion(ch Change) bool {
	if ch.OldImage == nil {
		return false
	}
	before, onItem := p.e.ledger.StateOf(ch.OldImage)
	after, _ := p.e.ledger.StateOf(ch.NewImage)
	switch {
	case onItem && before.Status != StatusPending && after.Status == StatusPending:
		return false
	case onItem && !before.Status.Finished() && after.Status.Finished():
		return true
	}
	return p.contentVersion(ch.OldImage) == p.contentVersion(ch.NewImage)
}

// setReader records the reader whose shards Stats reports.
func (w *Worker) setReader(r *follow.Reader) {
	w.mu.Lock()
	w.reader = r
	w.mu.Unlock()
}

// errNoStream is the configuration error of a Follow worker whose table has no stream it can use.
func errNoStream(table string, reason string) error {
	return configErr("Follow", "table %q %s: turn it on with `dynapart init --table %s --stream` before the first pass (follow.EnableStream)", table, reason, table)
}

// streamBegan is when the source table's stream was turned on, from its label (an ISO 8601 time
// in UTC, e.g. 2026-11-28T02:30:38.780); zero when the label is not one.
func streamBegan(d *types.TableDescription) time.Time {
	t, err := time.Parse("2006-01-02T15:04:05.999999999", aws.ToString(d.LatestStreamLabel))
	if err != nil {
		return time.Time{}
	}
	return t
}

// followedStream is the ARN of the source table's stream, which Follow needs on with new and old
// images.
func followedStream(table string, d *types.TableDescription) (string, error) {
	spec := d.StreamSpecification
	switch {
	case spec == nil || !aws.ToBool(spec.StreamEnabled) || aws.ToString(d.LatestStreamArn) == "":
		return "", errNoStream(table, "has no stream")
	case spec.StreamViewType != follow.ViewType:
		return "", errNoStream(table, fmt.Sprintf("streams %s, not %s", spec.StreamViewType, follow.ViewType))
	}
	return aws.ToString(d.LatestStreamArn), nil
}

// followStream follows the stream until the slot stops, and then returns nil. A stream that lost
// records the slot's checkpoints need makes the slot's next pass a rescan of the whole table (the
// log and Stats say so); other failures are retried as a failed pass is, until OutageTimeout.
func (s *slot) followStream(out *outage) error {
	began := s.w.cfg.Clock.Now()
	err := s.tail()
	switch {
	case s.stopped() || s.pastStop():
		return nil
	case errors.Is(err, follow.ErrTrimmed):
		s.trimmed(err)
		return nil
	case err != nil:
		if s.w.cfg.Clock.Now().Sub(began) >= s.w.cfg.OutageTimeout {
			*out = outage{} // it followed longer than an outage may last: this failure begins a new one
		}
		_, ferr := s.failedPass(out, err, false) // a follow resumes no pass
		return ferr
	}
	return nil
}
