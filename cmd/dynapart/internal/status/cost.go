package status

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// What the page's reads cost: the page sends its lease and ledger reads through a meter that
// asks DynamoDB for their consumed capacity (ReturnConsumedCapacity TOTAL) and adds it up, so the
// page can say what looking at it costs.

// pageReads are the document's `reads`: what the page's server has read since it started.
type pageReads struct {
	Since time.Time `json:"since"`
	// GroupReads are the samples taken, one read of the group's items in the lease table each
	// (a consistent Query); LeaseRequests and LeaseReadUnits what they cost.
	GroupReads     int64   `json:"group_reads"`
	LeaseRequests  int64   `json:"lease_requests"`
	LeaseReadUnits float64 `json:"lease_read_units"`
	// LedgerReads are the ledger's reads (counts and dead letters, scans), LedgerRequests their
	// Scan requests and LedgerReadUnits their cost.
	LedgerReads     int64   `json:"ledger_reads"`
	LedgerRequests  int64   `json:"ledger_requests"`
	LedgerReadUnits float64 `json:"ledger_read_units"`
	// StreamRequests are the DynamoDB Streams requests of the stream's reads (DescribeStream,
	// GetShardIterator, GetRecords; a group that follows a stream only); the GetItems of its
	// shards' leases count in LeaseRequests and LeaseReadUnits.
	StreamRequests int64 `json:"stream_requests"`
	// Views are the documents served (each poll of the page, each GET of /api/status); a view
	// reads nothing from DynamoDB.
	Views int64 `json:"views"`
}

// readMeter adds up requests and the read units DynamoDB reported for them.
type readMeter struct {
	mu       sync.Mutex
	requests int64
	units    float64
}

func (m *readMeter) add(c *types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	if c != nil {
		m.units += aws.ToFloat64(c.CapacityUnits)
	}
}

func (m *readMeter) total() (requests int64, units float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests, m.units
}

// metered sends one read through m: it asks for the consumed capacity unless the caller did
// (on a copy of in), and adds the answer's to m.
func metered[In, Out any](m *readMeter, in *In, ask func(*In) *types.ReturnConsumedCapacity, call func(*In) (*Out, error), consumed func(*Out) *types.ConsumedCapacity) (*Out, error) {
	if *ask(in) == "" {
		c := *in
		in = &c
		*ask(in) = types.ReturnConsumedCapacityTotal
	}
	out, err := call(in)
	if err == nil {
		m.add(consumed(out))
	}
	return out, err
}

// meteredLeaseDB is the lease table's client of the page, its reads metered (the page reads
// the group with GroupStatus: one Query; a followed stream's shard leases with a GetItem each).
type meteredLeaseDB struct {
	lock.DynamoDBClient
	m *readMeter
}

func (d meteredLeaseDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return metered(d.m, in, func(in *dynamodb.QueryInput) *types.ReturnConsumedCapacity { return &in.ReturnConsumedCapacity },
		func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			return d.DynamoDBClient.Query(ctx, in, opts...)
		},
		func(out *dynamodb.QueryOutput) *types.ConsumedCapacity { return out.ConsumedCapacity })
}

func (d meteredLeaseDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return metered(d.m, in, func(in *dynamodb.GetItemInput) *types.ReturnConsumedCapacity { return &in.ReturnConsumedCapacity },
		func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return d.DynamoDBClient.GetItem(ctx, in, opts...)
		},
		func(out *dynamodb.GetItemOutput) *types.ConsumedCapacity { return out.ConsumedCapacity })
}

// meteredStreams is the page's DynamoDB Streams client, its requests counted (the Streams API
// reports no capacity).
type meteredStreams struct {
	follow.StreamsClient
	m *readMeter
}

func (s meteredStreams) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	s.m.add(nil)
	return s.StreamsClient.DescribeStream(ctx, in, opts...)
}

func (s meteredStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	s.m.add(nil)
	return s.StreamsClient.GetShardIterator(ctx, in, opts...)
}

func (s meteredStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	s.m.add(nil)
	return s.StreamsClient.GetRecords(ctx, in, opts...)
}

// meteredLedgerDB is the ledger's client of the page, its scans metered (the page's ledger only
// reads).
type meteredLedgerDB struct {
	worker.LedgerClient
	m *readMeter
}

func (d meteredLedgerDB) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return metered(d.m, in, func(in *dynamodb.ScanInput) *types.ReturnConsumedCapacity { return &in.ReturnConsumedCapacity },
		func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
			return d.LedgerClient.Scan(ctx, in, opts...)
		},
		func(out *dynamodb.ScanOutput) *types.ConsumedCapacity { return out.ConsumedCapacity })
}
