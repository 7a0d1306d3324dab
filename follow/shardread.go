package follow

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dynapart/dynapart/lock"
)

// shardReader reads one leased shard from its checkpoint, one batch at a time. Since a batch's
// checkpoint is saved before the shard's next GetRecords, the position in memory is always the
// checkpoint: an iterator that expired is replaced by one after the checkpoint, and a reader that
// dies repeats at most the batch it had in flight.
type shardReader struct {
	ru    *run
	r     *Reader
	shard shard
	lease *shardLease
	ctx   context.Context // ends with the run, or when the lease is lost
	iter  *string         // nil: get one from the checkpoint
}

func newShardReader(ru *run, s shard, l *lock.Lease) *shardReader {
	return &shardReader{ru: ru, r: ru.r, shard: s,
		lease: &shardLease{r: ru.r, shard: s.id, lease: l, checkpoint: l.Checkpoint()}}
}

// read reads the shard until it is finished (true), its lease or the run ends (false, nil), or an
// error that is to end the Run.
func (s *shardReader) read() (finished bool, err error) {
	ctx, cancel := context.WithCancelCause(s.ru.ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.lease.lease.Context(), func() { cancel(context.Cause(s.lease.lease.Context())) })
	defer stop()
	s.ctx = ctx
	for s.ctx.Err() == nil {
		out, err := s.records()
		if err != nil {
			return false, stopped(err)
		}
		if len(out.Records) > 0 {
			if err := s.deliver(newBatch(s.shard.id, out.Records)); err != nil {
				return false, stopped(err)
			}
		}
		if out.NextShardIterator == nil { // closed, and read to its end
			return s.lease.finish(s.ru.ctx)
		}
		s.iter = out.NextShardIterator
		if len(out.Records) == 0 && !s.r.wait(s.ctx, s.r.cfg.PollInterval) {
			break
		}
	}
	return false, nil
}

// stopped turns errStop, which ends the shard only, into no error for the Run.
func stopped(err error) error {
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// records returns the shard's next page. It gets an iterator from the checkpoint first when there
// is none (at the start, after one expired), and retries transient errors with a growing pause.
func (s *shardReader) records() (*dynamodbstreams.GetRecordsOutput, error) {
	for failures := 1; ; failures++ {
		if s.iter == nil {
			it, err := s.iterator()
			switch {
			case err == nil && it == nil: // a closed shard with nothing after the checkpoint
				return &dynamodbstreams.GetRecordsOutput{}, nil
			case err == nil:
				s.iter = it
			case s.ctx.Err() != nil:
				return nil, errStop
			case !transient(err):
				return nil, err
			default:
				if err := s.pause(failures, "get shard iterator", err); err != nil {
					return nil, err
				}
				continue
			}
		}
		out, err := s.r.cfg.Streams.GetRecords(s.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: s.iter})
		switch {
		case err == nil:
			return out, nil
		case s.ctx.Err() != nil:
			return nil, errStop
		case isExpired(err):
			s.r.log.Debug("follow: shard iterator expired, getting a new one", "shard", s.shard.id)
			s.iter = nil
			if failures == 1 {
				continue // at once; a fresh iterator that expires too is paused for like any error
			}
		case isTrimmed(err):
			// The iterator's position is gone (DynamoDB Local also answers so for an iterator taken
			// while its shard was empty, after a restart): a fresh one from the checkpoint tells
			// whether records were lost.
			s.iter = nil
		case !transient(err):
			return nil, fmt.Errorf("follow: read shard %s: %w", s.shard.id, err)
		}
		if err := s.pause(failures, "get records", err); err != nil {
			return nil, err
		}
	}
}

// pause logs a transient error and waits before the next try; errStop when the shard stops first.
func (s *shardReader) pause(failures int, what string, err error) error {
	d := s.r.backoff(failures)
	s.r.log.Warn("follow: reading a shard failed, retrying", "shard", s.shard.id, "op", what, "err", err,
		"failures", failures, "retry_in", d)
	if !s.r.wait(s.ctx, d) {
		return errStop
	}
	return nil
}

// iterator gets an iterator at the shard's start (TRIM_HORIZON) or after its checkpoint. A
// checkpoint the stream no longer holds is a *TrimmedError; so is a shard gone from the stream
// that had a checkpoint (a shard gone before anyone read it is left: errStop).
func (s *shardReader) iterator() (*string, error) {
	cp := s.lease.checkpoint
	out, err := s.r.cfg.Streams.GetShardIterator(s.ctx, iteratorAfter(s.r.cfg.StreamARN, s.shard.id, cp))
	switch {
	case err == nil:
		return out.ShardIterator, nil
	case cp != "" && isTrimmed(err) && s.rescanCovers():
		s.r.log.Warn("follow: the shard's checkpoint is older than the stream's retention; reading it from its oldest record (the caller's rescan covers what was lost)",
			"shard", s.shard.id, "checkpoint", cp, "rescanned", s.r.cfg.Rescanned)
		s.lease.checkpoint = ""
		return s.iterator()
	case cp != "" && isTrimmed(err):
		return nil, &TrimmedError{Shard: s.shard.id, Checkpoint: cp, Err: err,
			Reason: "the checkpoint is older than the stream's retention"}
	case cp != "" && isNotFound(err):
		return nil, &TrimmedError{Shard: s.shard.id, Checkpoint: cp, Err: err,
			Reason: "the shard is gone from the stream"}
	case isNotFound(err):
		s.r.log.Info("follow: shard gone from the stream before it was read", "shard", s.shard.id)
		return nil, errStop
	}
	return nil, fmt.Errorf("follow: shard iterator of %s: %w", s.shard.id, err)
}

// rescanCovers reports whether the caller's rescan (ReaderConfig.Rescanned) covers the records
// lost after the shard's checkpoint.
func (s *shardReader) rescanCovers() bool {
	return !s.lease.ownCheckpoint && s.r.rescanCovers()
}

// deliver hands the batch to fn, waits until it is Done, and saves its checkpoint. A batch not
// Done when the lease is lost or the run ends is left before the checkpoint (errStop).
func (s *shardReader) deliver(b *Batch) error {
	s.r.stats.delivered(b)
	if err := s.ru.fn(s.ctx, b); err != nil {
		if s.ctx.Err() != nil && isCancel(err) {
			return errStop
		}
		return fmt.Errorf("follow: shard %s: %w", s.shard.id, err)
	}
	select {
	case <-b.done:
	case <-s.ctx.Done():
		if !b.isDone() {
			return errStop
		}
	}
	s.r.stats.batchDone(b.Shard)
	if seq := b.last(); seq != "" {
		return s.lease.save(seq)
	}
	return nil
}
