package status

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// meteredLeaseDB is the lease table's client of the page, its Queries metered (the page reads
// the group with GroupStatus: one Query).
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
