package scan

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDBClient is the part of *dynamodb.Client a Scanner uses, so tests can wrap it.
type DynamoDBClient interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Config configures a Scanner for one slot. Client, Table and Plan.Slots are required; the index
// mode fields are required in index mode only.
type Config struct {
	// Client makes the requests. Required.
	Client DynamoDBClient
	// Table is the table to read. Required.
	Table string
	// Plan is how the table is split; the same on every worker.
	Plan Plan
	// Slot is this worker's slot, in [0, Plan.Slots).
	Slot int
	// PartitionAttr is the attribute filter mode partitions by. Defaults to the table's partition
	// key (from DescribeTable). Items without it belong to slot 0.
	PartitionAttr string
	// Description is Table's description when the caller has already read it (a worker reads it
	// once when it starts): Run then sends no DescribeTable of its own, a round trip less before
	// the first page. It must be Table's: its key schema, indexes and statistics are used as
	// Run's own DescribeTable would use them (an index deleted since it was read surfaces as the
	// Query's error, not as a ConfigError). Defaults to nil: Run describes the table.
	Description *types.TableDescription

	// IndexName is the sparse pending index queried in index mode (see CreatePendingIndex).
	IndexName string
	// ShardAttr is the index's partition key, a number in [0, Shards) (see MarkPending).
	ShardAttr string
	// Shards is the number of shard values; slot i queries the shards s with s % Slots == i, so
	// Shards should be at least Slots (a slot without a shard has nothing to do).
	Shards int

	// ConsistentRead makes reads strongly consistent, at twice the read cost. Not available in
	// index mode (global secondary indexes are eventually consistent). Defaults to false.
	ConsistentRead bool
	// Projection lists the top-level attributes the consumer needs; the key attributes,
	// PartitionAttr (filter mode) and ShardAttr (index mode) are always added. Names are used
	// verbatim (placeholders keep reserved words and dots safe). nil reads whole items. Fewer
	// attributes mean smaller pages; DynamoDB charges for whole items either way.
	Projection []string
	// ReadRate limits this scanner to about so many read capacity units per second, measured by
	// the ConsumedCapacity DynamoDB returns. Defaults to 0: unlimited. On-demand tables have no
	// provisioned rate to derive one from, so set it explicitly when a scan must leave room.
	ReadRate float64
	// PageLimit is the Limit (items evaluated) of each request. Defaults to 0: automatic, that is
	// DynamoDB's 1 MB pages without ReadRate, and with ReadRate a limit sized from the average item
	// cost (first DescribeTable's size/count, then what requests consumed) so that one request
	// costs about ReadRate divided by the requests in flight and cannot overshoot the bucket.
	PageLimit int32
	// MaxUnackedPages bounds the pages read but not fully acknowledged; reading waits while that
	// many are outstanding, so memory is bounded by pages, not table size. Defaults to
	// 2*SubSegments.
	MaxUnackedPages int
	// Resume is a checkpoint from Scanner.Checkpoint (or OnCheckpoint) to continue from; "" starts
	// from the beginning. It must come from a scan of the same table, mode and TotalSegments, and
	// hold cursors only for segments (shards) this slot owns under Plan; segments without a cursor
	// start from their beginning. Its cursors may come from other slots' checkpoints (see
	// Position.Cursor): after Plan.Slots changes, a slot resumes the segments it now owns.
	Resume string
	// OnCheckpoint, when set, is called with the new checkpoint whenever the acknowledged position
	// advances. Calls are serialized and in order; they run on the goroutine that called Item.Ack
	// (or on a reading goroutine), so keep the function quick, for example a store into an
	// atomic value that a saver goroutine persists.
	OnCheckpoint func(cp string)

	// Only, when not nil, restricts the scanner to these segments (index mode: shards), each one
	// the slot owns under Plan (a work-stealing worker reads one segment of another slot's share
	// this way). Resume may then hold cursors for these only. Defaults to nil: every unit the slot
	// owns.
	Only []int
	// BeforeSegment, when set, is called from a reading goroutine before a segment (shard) that
	// is not done starts being read, also one resumed mid-way. false skips the segment: it is not
	// read, keeps its cursor in checkpoints, and Done ignores it (the caller accounts for it).
	// An error ends Run with that error. Defaults to nil: every segment is read.
	BeforeSegment func(ctx context.Context, seg int) (bool, error)
}

// New checks cfg and prepares a Scanner; it makes no request and starts no goroutine. Invalid
// fields are reported as *ConfigError naming the field; a Resume that does not decode wraps
// ErrBadCheckpoint, one made for another scan wraps ErrCheckpointMismatch.
func New(cfg Config) (*Scanner, error) {
	plan := cfg.Plan.withDefaults()
	cfg.Plan = plan
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Pkg: "scan", Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case cfg.Client == nil:
		return nil, bad("Client", "is required")
	case cfg.Table == "":
		return nil, bad("Table", "is required")
	case cfg.Slot < 0 || cfg.Slot >= plan.Slots:
		return nil, bad("Slot", "must be in [0, %d), got %d", plan.Slots, cfg.Slot)
	case !(cfg.ReadRate >= 0) || math.IsInf(cfg.ReadRate, 1): // NaN fails every comparison
		return nil, bad("ReadRate", "must be a finite number >= 0, got %v", cfg.ReadRate)
	case cfg.PageLimit < 0:
		return nil, bad("PageLimit", "must not be negative, got %d", cfg.PageLimit)
	case cfg.MaxUnackedPages < 0:
		return nil, bad("MaxUnackedPages", "must not be negative, got %d", cfg.MaxUnackedPages)
	}
	if cfg.MaxUnackedPages == 0 {
		cfg.MaxUnackedPages = 2 * plan.SubSegments
	}
	s := &Scanner{cfg: cfg, plan: plan, parallel: plan.SubSegments}
	var segs []int
	if plan.Mode == ModeIndex {
		switch {
		case cfg.IndexName == "":
			return nil, bad("IndexName", "is required in index mode")
		case cfg.ShardAttr == "":
			return nil, bad("ShardAttr", "is required in index mode")
		case cfg.Shards < 1 || cfg.Shards > maxTotalSegments:
			return nil, bad("Shards", "must be in [1, %d] in index mode, got %d", maxTotalSegments, cfg.Shards)
		case cfg.ConsistentRead:
			return nil, bad("ConsistentRead", "global secondary indexes support eventually consistent reads only")
		}
		s.total = cfg.Shards
		for sh := cfg.Slot; sh < cfg.Shards; sh += plan.Slots {
			segs = append(segs, sh)
		}
	} else {
		s.total = plan.TotalSegments()
		segs = plan.Segments(cfg.Slot)
	}
	if cfg.Only != nil {
		var err error
		if segs, err = onlyUnits(segs, cfg.Only, cfg.Slot); err != nil {
			return nil, err
		}
	}
	// At most SubSegments requests in flight, however many segments (shards) the slot owns.
	s.parallel = max(1, min(s.parallel, len(segs)))
	s.streams = make([]*stream, len(segs))
	bySeg := make(map[int]*stream, len(segs))
	for i, seg := range segs {
		s.streams[i] = &stream{seg: seg, stats: SegmentStats{Segment: seg}}
		bySeg[seg] = s.streams[i]
	}
	if cfg.Resume != "" {
		p, err := DecodeCheckpoint(cfg.Resume)
		if err != nil {
			return nil, err
		}
		if err := s.checkPosition(p, bySeg); err != nil {
			return nil, err
		}
		for _, c := range p.Cursors {
			st := bySeg[c.Segment]
			st.done = c.Done
			if !c.Done {
				st.start, st.acked = c.LastEvaluatedKey, c.LastEvaluatedKey
			}
		}
	}
	s.sem = make(chan struct{}, cfg.MaxUnackedPages)
	return s, nil
}

// onlyUnits is Config.Only checked against the units the slot owns, in the slot's order.
func onlyUnits(owned, only []int, slot int) ([]int, error) {
	for i, u := range only {
		if !slices.Contains(owned, u) {
			return nil, &ConfigError{Pkg: "scan", Field: "Only", Reason: fmt.Sprintf("unit %d is not owned by slot %d", u, slot)}
		}
		if slices.Contains(only[:i], u) {
			return nil, &ConfigError{Pkg: "scan", Field: "Only", Reason: fmt.Sprintf("unit %d listed twice", u)}
		}
	}
	var out []int
	for _, u := range owned {
		if slices.Contains(only, u) {
			out = append(out, u)
		}
	}
	return out, nil
}

func (s *Scanner) checkPosition(p Position, bySeg map[int]*stream) error {
	index := ""
	if s.plan.Mode == ModeIndex {
		index = s.cfg.IndexName
	}
	switch {
	case p.Table != s.cfg.Table:
		return fmt.Errorf("%w: made for table %q, this scan reads %q", ErrCheckpointMismatch, p.Table, s.cfg.Table)
	case p.Index != index:
		return fmt.Errorf("%w: made for index %q, this scan reads %q", ErrCheckpointMismatch, p.Index, index)
	case p.Mode != "" && p.Mode != s.plan.Mode:
		return fmt.Errorf("%w: made in %s mode, this scan is in %s mode", ErrCheckpointMismatch, p.Mode, s.plan.Mode)
	case p.TotalSegments != s.total:
		return fmt.Errorf("%w: made for TotalSegments %d, this scan has %d", ErrCheckpointMismatch, p.TotalSegments, s.total)
	}
	for _, c := range p.Cursors {
		if bySeg[c.Segment] == nil {
			return fmt.Errorf("%w: segment %d is not read by slot %d of %d", ErrCheckpointMismatch, c.Segment, s.cfg.Slot, s.plan.Slots)
		}
	}
	return nil
}
