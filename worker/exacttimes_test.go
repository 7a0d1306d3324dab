package worker

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dynapart/dynapart/follow"
)

// exactTimes undoes DynamoDB Local's rounding of a stream record's ApproximateCreationDateTime
// down to the minute (DynamoDB rounds to the second), for tests whose stream retention is
// seconds: a record's time is when a read through exactTimes first saw it, if that is within
// the minute DynamoDB Local rounded it to. That is at or after the record's creation, by about a
// reader's poll: a group that keeps up reads as keeping up, which with minutes-old times it
// cannot under a retention of seconds. For liveness tests only: a record nobody has read yet,
// first seen by a look, reads as younger than it is, which could hide a loss.
type exactTimes struct {
	follow.StreamsClient
	mu   sync.Mutex
	seen map[string]time.Time // sequence number → the time first seen
}

func newExactTimes(sc follow.StreamsClient) *exactTimes {
	return &exactTimes{StreamsClient: sc, seen: map[string]time.Time{}}
}

func (s *exactTimes) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	out, err := s.StreamsClient.GetRecords(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range out.Records {
		if r.Dynamodb == nil || r.Dynamodb.ApproximateCreationDateTime == nil {
			continue
		}
		seq := aws.ToString(r.Dynamodb.SequenceNumber)
		first, ok := s.seen[seq]
		if !ok {
			first = now
			s.seen[seq] = now
		}
		rounded := *r.Dynamodb.ApproximateCreationDateTime
		if first.Before(rounded.Add(time.Minute)) && first.After(rounded) {
			d := *r.Dynamodb
			d.ApproximateCreationDateTime = aws.Time(first)
			out.Records[i].Dynamodb = &d
		}
	}
	return out, nil
}
