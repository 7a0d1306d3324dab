package follow

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// fakeStream is a DynamoDB stream in memory, for what a server cannot be made to do on demand:
// shards that close and have children, iterators that expire, records trimmed away, throttling.
// The lock table under the Reader stays real (DynamoDB Local).
type fakeStream struct {
	mu      sync.Mutex
	shards  []*fakeShard
	status  stypes.StreamStatus
	page    int // shards per DescribeStream page (0: all)
	batch   int // records per GetRecords page (0: all)
	iters   map[string]fakeIter
	nextID  int
	fault   func(op string) error // an error it returns is the call's answer (nil: call on)
	asked   []dynamodbstreams.GetShardIteratorInput
	created time.Time // ApproximateCreationDateTime of every record
}

type fakeShard struct {
	id, parent string
	recs       []stypes.Record
	closed     bool
	trimmed    int // records before this index are gone
}

type fakeIter struct {
	shard *fakeShard
	pos   int
}

func newFakeStream() *fakeStream {
	return &fakeStream{status: stypes.StreamStatusEnabled, iters: map[string]fakeIter{},
		created: time.Now().Add(-time.Hour)}
}

const fakeARN = "arn:aws:dynamodb:us-east-1:000000000000:table/fake/stream/2030-01-01T00:00:00.000"

// addShard adds a shard (parent "" for none) and returns its id.
func (f *fakeStream) addShard(id, parent string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards = append(f.shards, &fakeShard{id: id, parent: parent})
	return id
}

// write appends records for keys to the shard; their sequence numbers rise across the stream.
func (f *fakeStream) write(shard string, keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sh := f.find(shard)
	for _, k := range keys {
		f.nextID++
		seq := fmt.Sprintf("%021d", f.nextID)
		sh.recs = append(sh.recs, stypes.Record{EventName: stypes.OperationTypeModify, Dynamodb: &stypes.StreamRecord{
			SequenceNumber: aws.String(seq), ApproximateCreationDateTime: aws.Time(f.created),
			Keys: map[string]stypes.AttributeValue{"id": &stypes.AttributeValueMemberS{Value: k}},
			NewImage: map[string]stypes.AttributeValue{"id": &stypes.AttributeValueMemberS{Value: k},
				"n": &stypes.AttributeValueMemberN{Value: strconv.Itoa(f.nextID)}},
		}})
	}
}

func (f *fakeStream) close(shard string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.find(shard).closed = true
}

func (f *fakeStream) setFault(fault func(op string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

// iteratorRequests returns the GetShardIterator calls answered so far.
func (f *fakeStream) iteratorRequests() []dynamodbstreams.GetShardIteratorInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

func (f *fakeStream) find(id string) *fakeShard {
	for _, s := range f.shards {
		if s.id == id {
			return s
		}
	}
	return nil
}

// injected is the fault's answer to op; callers hold mu.
func (f *fakeStream) injected(op string) error {
	if f.fault == nil {
		return nil
	}
	return f.fault(op)
}

func (f *fakeStream) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("DescribeStream"); err != nil {
		return nil, err
	}
	from := 0
	if in.ExclusiveStartShardId != nil {
		from = slices.IndexFunc(f.shards, func(s *fakeShard) bool { return s.id == *in.ExclusiveStartShardId }) + 1
	}
	to := len(f.shards)
	if f.page > 0 {
		to = min(to, from+f.page)
	}
	d := &stypes.StreamDescription{StreamArn: in.StreamArn, StreamStatus: f.status}
	for _, s := range f.shards[from:to] {
		sh := stypes.Shard{ShardId: aws.String(s.id), ParentShardId: optional(s.parent)}
		if s.closed {
			sh.SequenceNumberRange = &stypes.SequenceNumberRange{EndingSequenceNumber: aws.String(fmt.Sprint(len(s.recs)))}
		}
		d.Shards = append(d.Shards, sh)
	}
	if to < len(f.shards) {
		d.LastEvaluatedShardId = aws.String(f.shards[to-1].id)
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: d}, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

func (f *fakeStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("GetShardIterator"); err != nil {
		return nil, err
	}
	f.asked = append(f.asked, *in)
	sh := f.find(aws.ToString(in.ShardId))
	if sh == nil {
		return nil, &stypes.ResourceNotFoundException{Message: aws.String("no such shard")}
	}
	pos := sh.trimmed
	switch in.ShardIteratorType {
	case stypes.ShardIteratorTypeAfterSequenceNumber, stypes.ShardIteratorTypeAtSequenceNumber:
		i := slices.IndexFunc(sh.recs, func(r stypes.Record) bool { return *r.Dynamodb.SequenceNumber == aws.ToString(in.SequenceNumber) })
		if i < sh.trimmed {
			return nil, &stypes.TrimmedDataAccessException{Message: aws.String("trimmed")}
		}
		pos = i
		if in.ShardIteratorType == stypes.ShardIteratorTypeAfterSequenceNumber {
			pos++
		}
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: f.iterator(sh, pos)}, nil
}

// iterator registers a fresh iterator; callers hold mu.
func (f *fakeStream) iterator(sh *fakeShard, pos int) *string {
	f.nextID++
	id := fmt.Sprintf("it-%d", f.nextID)
	f.iters[id] = fakeIter{shard: sh, pos: pos}
	return &id
}

func (f *fakeStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("GetRecords"); err != nil {
		return nil, err
	}
	it, ok := f.iters[aws.ToString(in.ShardIterator)]
	if !ok {
		return nil, &stypes.ExpiredIteratorException{Message: aws.String("unknown iterator")}
	}
	sh := it.shard
	end := len(sh.recs)
	if f.batch > 0 {
		end = min(end, it.pos+f.batch)
	}
	out := &dynamodbstreams.GetRecordsOutput{Records: slices.Clone(sh.recs[it.pos:end])}
	if !sh.closed || end < len(sh.recs) {
		out.NextShardIterator = f.iterator(sh, end)
	}
	return out, nil
}

// trim drops the shard's first n records, as the stream's retention does.
func (f *fakeStream) trim(shard string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.find(shard).trimmed = n
}

// seqs returns the sequence numbers of the shard's records.
func (f *fakeStream) seqs(shard string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.find(shard).recs {
		out = append(out, *r.Dynamodb.SequenceNumber)
	}
	return out
}
