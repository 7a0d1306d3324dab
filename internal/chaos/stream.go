package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynapart/dynapart/follow"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// leaseStream reads the lease table's DynamoDB stream (new and old images): every write to a slot
// item, in order. Polling the table, however often, misses states that last a few milliseconds —
// a holder whose lease ran out by its own clock releases the slot and takes it again at once, and
// a poll then sees token n+1 follow an unreleased token n — so the lease history is checked on
// the stream; polling only serves the scenarios' "has the slot been taken over yet" waits.
type leaseStream struct {
	sc     *dynamodbstreams.Client
	arn    string
	pk     string
	shards map[string]*shardPos
	order  []string // shard ids in the order first seen (parents are listed before children)

	// broken is set when continuity was lost (records trimmed, the stream replaced): the history
	// is then incomplete and the report falls back to the polled checks.
	broken error
	errors int // transient read errors (DynamoDB down in the restart scenario)
}

type shardPos struct {
	parent  string
	iter    *string
	lastSeq string // sequence number of the last record applied
	started bool   // an iterator was ever obtained
	done    bool   // closed and read to its end
}

// enableStream turns on the lease table's stream (new and old images) unless it is on, and returns
// a reader that starts at the stream's beginning.
func enableStream(ctx context.Context, db *dynamodb.Client, sc *dynamodbstreams.Client, table, group string) (*leaseStream, error) {
	arn, _, err := follow.EnableStream(ctx, db, table)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if arn == "" {
		return nil, fmt.Errorf("chaos: %s has no stream ARN", table)
	}
	return &leaseStream{sc: sc, arn: arn, pk: "group#" + group, shards: map[string]*shardPos{}}, nil
}

// read applies every record written since the last read to h. It returns how many records it
// applied, and the error that stopped it early; such errors only delay the reading (DynamoDB
// restarting) unless they set broken.
func (s *leaseStream) read(ctx context.Context, h *streamHistory) (int, error) {
	if s.broken != nil {
		return 0, s.broken
	}
	d, err := s.sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.arn)})
	if err != nil {
		s.errors++
		return 0, err
	}
	for _, sh := range d.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		if _, ok := s.shards[id]; !ok {
			s.shards[id] = &shardPos{parent: aws.ToString(sh.ParentShardId)}
			s.order = append(s.order, id)
		}
	}
	applied := 0
	for _, id := range s.order {
		pos := s.shards[id]
		if pos.done {
			continue
		}
		if p, ok := s.shards[pos.parent]; ok && !p.done {
			continue // a child's records follow its parent's
		}
		n, err := s.readShard(ctx, id, pos, h)
		applied += n
		if err == nil && h.gap != "" {
			err = errors.New(h.gap)
		}
		if err != nil {
			if errors.Is(err, errLostContinuity) || h.gap != "" {
				s.broken = fmt.Errorf("shard %s: %w", id, err)
			}
			s.errors++
			return applied, err
		}
	}
	return applied, nil
}

// errLostContinuity says records may have been skipped: the history is incomplete.
var errLostContinuity = errors.New("records after the last one read are gone")

// readShard reads one shard until it has nothing new (or is closed).
func (s *leaseStream) readShard(ctx context.Context, id string, pos *shardPos, h *streamHistory) (int, error) {
	applied := 0
	for {
		if pos.iter == nil {
			in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.arn), ShardId: aws.String(id),
				ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon}
			if pos.lastSeq != "" {
				in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeAfterSequenceNumber, aws.String(pos.lastSeq)
			}
			out, err := s.sc.GetShardIterator(ctx, in)
			var trimmed *stypes.TrimmedDataAccessException
			if errors.As(err, &trimmed) && pos.lastSeq != "" {
				return applied, fmt.Errorf("%w: %w", errLostContinuity, err)
			}
			if err != nil {
				return applied, err
			}
			pos.iter, pos.started = out.ShardIterator, true
			if pos.iter == nil {
				pos.done = true
				return applied, nil
			}
		}
		out, err := s.sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: pos.iter})
		if err != nil {
			var expired *stypes.ExpiredIteratorException
			if errors.As(err, &expired) {
				pos.iter = nil // a fresh iterator after the last applied record
				continue
			}
			// After a restart the old iterator may be gone, and DynamoDB Local answers
			// TrimmedDataAccessException for an iterator taken while the shard was empty: resume
			// after the last record applied (the images' continuity check catches a real gap).
			pos.iter = nil
			return applied, err
		}
		for _, rec := range out.Records {
			seq := aws.ToString(rec.Dynamodb.SequenceNumber)
			if pos.lastSeq != "" && !seqAfter(seq, pos.lastSeq) {
				continue // seen before a resume
			}
			pos.lastSeq = seq
			if h.apply(s.pk, rec) {
				applied++
			}
		}
		pos.iter = out.NextShardIterator
		if pos.iter == nil {
			pos.done = true
			return applied, nil
		}
		if len(out.Records) == 0 {
			return applied, nil
		}
	}
}

// seqAfter compares stream sequence numbers (decimal strings).
func seqAfter(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// streamHistory checks every consecutive pair of images of a slot item.
type streamHistory struct {
	records    int
	acquires   int
	takeovers  int
	releases   int // a holder set released on its lease
	resets     int // ResetGroup's owner removals (same token, owner, finished and checkpoint removed)
	retakes    int // a slot released and taken again by the same owner (polls used to misread this)
	violations []string
	owners     map[[2]int64]string // (slot, token) -> owner
	last       map[int64]streamImage
	gap        string // set when a record's old image is not the previous record's new image
}

type streamImage struct {
	exists   bool
	owner    string
	token    int64
	expires  int64 // ms, by the holder's clock
	acquired int64 // ms, by the acquirer's clock
	released bool
	finished bool
	epoch    int64 // the plan epoch the holder took the slot under (lock: a resize re-opens finished slots)
	version  int64
	cp       string
}

func decodeStreamImage(sm map[string]stypes.AttributeValue) streamImage {
	if len(sm) == 0 {
		return streamImage{}
	}
	m := fromStream(sm)
	im := streamImage{exists: true, owner: sAttr(m, "owner"), token: nAttr(m, "token"),
		expires: nAttr(m, "expires_at"), acquired: nAttr(m, "acquired_at"),
		epoch: nAttr(m, "epoch"), version: nAttr(m, "version"), cp: sAttr(m, "checkpoint")}
	if b, ok := m["released"].(*types.AttributeValueMemberBOOL); ok {
		im.released = b.Value
	}
	if b, ok := m["finished"].(*types.AttributeValueMemberBOOL); ok {
		im.finished = b.Value
	}
	return im
}

// fromStream converts the scalar attributes of a stream image (the Streams API has its own
// AttributeValue types) to DynamoDB's, so polls and stream records decode alike. Slot items hold
// only strings, numbers and booleans.
func fromStream(sm map[string]stypes.AttributeValue) map[string]types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(sm))
	for k, v := range sm {
		switch v := v.(type) {
		case *stypes.AttributeValueMemberS:
			m[k] = &types.AttributeValueMemberS{Value: v.Value}
		case *stypes.AttributeValueMemberN:
			m[k] = &types.AttributeValueMemberN{Value: v.Value}
		case *stypes.AttributeValueMemberBOOL:
			m[k] = &types.AttributeValueMemberBOOL{Value: v.Value}
		}
	}
	return m
}

// apply checks one record; it reports whether the record was a slot item of the group.
//   - the token never goes back and grows by exactly one per acquisition (the write requires the
//     token it read);
//   - a token has one owner for its whole life;
//   - a slot finished under a plan epoch is taken again only under a newer plan (after a resize);
//   - a new token is taken only from a released lease, or at or after the previous holder's
//     expires_at (acquired_at is the new holder's clock, expires_at the old holder's: with skew
//     within MaxClockSkew the waiting contender's margin covers the difference).
func (h *streamHistory) apply(pk string, rec stypes.Record) bool {
	sr := rec.Dynamodb
	if sr == nil {
		return false
	}
	keys := fromStream(sr.Keys)
	if sAttr(keys, "pk") != pk {
		return false
	}
	slot := nAttr(keys, "sk")
	if slot < 0 {
		return false // the group's meta item
	}
	h.records++
	old, cur := decodeStreamImage(sr.OldImage), decodeStreamImage(sr.NewImage)
	// Every write's old image is the previous write's new image, or a write is missing.
	if prev, ok := h.last[slot]; ok && prev != old && h.gap == "" {
		h.gap = fmt.Sprintf("slot %d: a write is missing from the stream (last image %+v, next write's old image %+v)", slot, prev, old)
	}
	if h.last == nil {
		h.last = map[int64]streamImage{}
	}
	h.last[slot] = cur
	if !cur.exists || cur.token == 0 {
		return true // deleted (ResetGroup) or not a lease
	}
	if isReset(old, cur) {
		h.resets++ // the token keeps its owner in the history: the reset fences it, it does not hand it on
		return true
	}
	key := [2]int64{slot, cur.token}
	if o, ok := h.owners[key]; ok && o != cur.owner {
		h.fail("slot %d token %d held by %s and by %s", slot, cur.token, o, cur.owner)
	}
	h.owners[key] = cur.owner
	switch {
	case cur.token < old.token:
		h.fail("slot %d token went back from %d to %d", slot, old.token, cur.token)
	case cur.token > old.token:
		h.acquires++
		if cur.token != old.token+1 {
			h.fail("slot %d token jumped from %d to %d in one write", slot, old.token, cur.token)
		}
		if old.released && old.owner == cur.owner {
			h.retakes++
		}
		if old.exists && old.token > 0 && !old.released {
			h.takeovers++
			if cur.acquired < old.expires {
				h.fail("slot %d: %s took token %d at %d while %s's token %d was held until %d (not released)",
					slot, cur.owner, cur.token, cur.acquired, old.owner, old.token, old.expires)
			}
		}
		if old.finished && cur.epoch <= old.epoch {
			h.fail("slot %d: %s took token %d of a slot finished under the same plan (epoch %d)", slot, cur.owner, cur.token, old.epoch)
		}
	case cur.released && !old.released:
		h.releases++
	case old.exists && cur.owner != old.owner:
		h.fail("slot %d token %d changed owner from %s to %s without a new token", slot, cur.token, old.owner, cur.owner)
	case old.exists && old.released && !cur.released:
		h.fail("slot %d token %d of %s was un-released without a new token", slot, cur.token, cur.owner)
	}
	return true
}

// isReset reports whether a write is lock.ResetGroup's: it removes the owner, the finished mark and
// the checkpoint of a slot and keeps its token, so the token's next write must be a new
// acquisition. This is the one write that takes an owner from a token without a new token.
func isReset(old, cur streamImage) bool {
	return old.exists && cur.exists && old.token > 0 && cur.token == old.token &&
		old.owner != "" && cur.owner == "" && !cur.finished && cur.cp == ""
}

func (h *streamHistory) fail(format string, args ...any) {
	if len(h.violations) < 50 {
		h.violations = append(h.violations, fmt.Sprintf(format, args...))
	}
}

// drain reads the stream until a read applies nothing, or until timeout.
func (s *leaseStream) drain(h *streamHistory, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for ctx.Err() == nil && s.broken == nil {
		n, err := s.read(ctx, h)
		switch {
		case err != nil:
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		case n == 0 && s.caughtUp():
			return
		}
	}
}

// caughtUp reports whether every shard has been started (an empty read proves nothing for a shard
// whose parent was still being read).
func (s *leaseStream) caughtUp() bool {
	for _, p := range s.shards {
		if !p.done && !p.started {
			return false
		}
	}
	return true
}
