package scan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"
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

// Scanner reads one slot's share of a table, page by page, and tracks which pages the consumer
// has acknowledged. Create one with New; Run it once.
type Scanner struct {
	cfg      Config
	plan     Plan
	total    int // TotalSegments of positions: Plan.TotalSegments, or Shards in index mode
	parallel int
	streams  []*stream // the slot's segments (shards), in order
	sem      chan struct{}
	ran      atomic.Bool

	// set by Run before reading starts:
	limiter    *readLimiter // nil: unlimited
	projection *string
	projNames  map[string]string

	mu       sync.Mutex // guards the fields below and every stream's tracked fields
	keyAttrs []string
	version  uint64 // counts position advances
	started  time.Time
	finished time.Time

	cbMu      sync.Mutex // serializes OnCheckpoint
	cbVersion uint64
}

// stream is one segment (index mode: one shard) of the slot.
type stream struct {
	seg       int
	start     map[string]types.AttributeValue // where reading starts (from Resume)
	throttles atomic.Int64

	// guarded by Scanner.mu:
	acked   map[string]types.AttributeValue // the position: every page before it is acknowledged
	done    bool                            // acknowledged through the last page
	skipped bool                            // BeforeSegment said no: not read, ignored by Done
	pending []*pageState                    // pages read, in order, not yet behind the position
	stats   SegmentStats
}

type pageState struct {
	s       *Scanner
	st      *stream
	end     map[string]types.AttributeValue // LastEvaluatedKey; nil: the segment's last page
	unacked atomic.Int64
}

// Page is one response's worth of items kept for this slot, delivered to Run's callback.
type Page struct {
	Segment int // the scan segment, or the shard in index mode
	Items   []*Item
}

// Item is one item of a Page. The consumer calls Ack when it is finished with the item (processed
// or deliberately skipped); the checkpoint passes a page only when all its items are acknowledged.
type Item struct {
	Attrs map[string]types.AttributeValue
	page  *pageState
	acked atomic.Bool
}

// Ack marks the item finished. It is idempotent and safe from any goroutine, also after Run has
// returned (the position keeps advancing, so a final Checkpoint covers late acknowledgements).
func (i *Item) Ack() {
	if i.page == nil || !i.acked.CompareAndSwap(false, true) {
		return
	}
	if i.page.unacked.Add(-1) == 0 {
		i.page.s.pageAcked(i.page)
	}
}

// SegmentStats describes the reading of one segment (index mode: one shard).
type SegmentStats struct {
	Segment   int
	Scanned   int64         // items DynamoDB evaluated (ScannedCount)
	Returned  int64         // items kept for this slot and delivered
	RCU       float64       // read capacity consumed, as DynamoDB reported it
	Throttles int64         // attempts DynamoDB throttled (the SDK retried them)
	Pages     int64         // responses
	Duration  time.Duration // time spent in requests, SDK retries included
}

// Stats sums the segments. Duration is the wall time Run has been reading.
type Stats struct {
	Segments  []SegmentStats
	Scanned   int64
	Returned  int64
	RCU       float64
	Throttles int64
	Pages     int64
	Duration  time.Duration
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

// KeyAttrs returns the table's key attribute names, partition key first, once Run has described
// the table; nil before.
func (s *Scanner) KeyAttrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keyAttrs)
}

// Checkpoint encodes the position reached by acknowledgements: for each segment, the start of its
// first page that is not fully acknowledged. A scanner resumed from it reads again every page that
// still had an unacknowledged item (and so also that page's acknowledged items), and nothing
// before. It is safe to call at any time, also after Run.
func (s *Scanner) Checkpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkpointLocked()
}

func (s *Scanner) checkpointLocked() string {
	p := Position{Table: s.cfg.Table, Mode: s.plan.Mode, TotalSegments: s.total, Cursors: make([]Cursor, len(s.streams))}
	if s.plan.Mode == ModeIndex {
		p.Index = s.cfg.IndexName
	}
	for i, st := range s.streams {
		p.Cursors[i] = Cursor{TotalSegments: s.total, Segment: st.seg, LastEvaluatedKey: st.acked, Done: st.done}
	}
	cp, err := EncodeCheckpoint(p)
	if err != nil {
		return "" // keys are always S, N or B, so this cannot happen
	}
	return cp
}

// Done reports whether every segment has been read to its end and every delivered item
// acknowledged: the slot's share is finished (segments BeforeSegment skipped excepted).
func (s *Scanner) Done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.streams {
		if !st.done && !st.skipped {
			return false
		}
	}
	return true
}

// Stats returns the reading statistics so far; safe to call while Run runs.
func (s *Scanner) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out Stats
	out.Segments = make([]SegmentStats, len(s.streams))
	for i, st := range s.streams {
		ss := st.stats
		ss.Throttles = st.throttles.Load()
		out.Segments[i] = ss
		out.Scanned += ss.Scanned
		out.Returned += ss.Returned
		out.RCU += ss.RCU
		out.Throttles += ss.Throttles
		out.Pages += ss.Pages
	}
	switch {
	case !s.finished.IsZero():
		out.Duration = s.finished.Sub(s.started)
	case !s.started.IsZero():
		out.Duration = time.Since(s.started)
	}
	return out
}

// ErrRunTwice is returned by a second call of Scanner.Run.
var ErrRunTwice = errors.New("scan: Run called twice")

// Run reads the slot's share and calls fn for each page that has items for this slot, one page at
// a time from Run's goroutine; segments are read in parallel ahead of fn, up to MaxUnackedPages
// unacknowledged pages. Items may be acknowledged in any order, during fn or later, from any
// goroutine; but reading waits while MaxUnackedPages pages are unacknowledged, so a consumer must
// not hold that many pages and wait for the next one (hand items to workers that Ack them).
//
// Run returns nil when every segment has been read to its end, without waiting for
// acknowledgements (see Done); ctx's error when ctx ends; fn's error when fn fails (pages read
// but not yet given to fn are dropped and stay behind the checkpoint); or a request's error.
// It returns only after every goroutine it started has returned, including when fn blocks until
// ctx ends.
func (s *Scanner) Run(ctx context.Context, fn func(ctx context.Context, p *Page) error) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	if err := s.describe(ctx); err != nil {
		return err
	}
	var todo []*stream
	s.mu.Lock()
	s.started = time.Now()
	for _, st := range s.streams {
		if !st.done {
			todo = append(todo, st)
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.finished = time.Now()
		s.mu.Unlock()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	pages := make(chan *Page)
	var next atomic.Int64
	readers := atomic.Int64{}
	n := min(s.parallel, len(todo))
	readers.Store(int64(n))
	if n == 0 {
		close(pages)
	}
	for range n {
		g.Go(func() error {
			defer func() {
				if readers.Add(-1) == 0 {
					close(pages)
				}
			}()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return nil
				}
				if err := s.readUnlessSkipped(gctx, todo[i], pages); err != nil {
					return err
				}
			}
		})
	}
	var fnErr error
	for p := range pages {
		if fnErr != nil || gctx.Err() != nil {
			continue // drain so the readers can finish
		}
		if err := fn(gctx, p); err != nil {
			fnErr = err
			cancel()
		}
	}
	readErr := g.Wait()
	switch {
	case fnErr != nil:
		return fnErr
	case ctx.Err() != nil && (readErr == nil || errors.Is(readErr, context.Canceled) || errors.Is(readErr, context.DeadlineExceeded)):
		return context.Cause(ctx)
	}
	return readErr
}

// describe learns the key schema, the default PartitionAttr and the average item size.
func (s *Scanner) describe(ctx context.Context) error {
	t := s.cfg.Description
	if t == nil {
		out, err := s.cfg.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.cfg.Table)})
		if err != nil {
			return fmt.Errorf("scan: describe table %q: %w", s.cfg.Table, err)
		}
		t = out.Table
	}
	keys := KeyAttributes(t.KeySchema)
	if s.plan.Mode == ModeIndex && !slices.ContainsFunc(t.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndexDescription) bool {
		return aws.ToString(g.IndexName) == s.cfg.IndexName
	}) {
		return &ConfigError{Pkg: "scan", Field: "IndexName", Reason: fmt.Sprintf("table %q has no index %q (see CreatePendingIndex)", s.cfg.Table, s.cfg.IndexName)}
	}
	if s.cfg.PartitionAttr == "" && len(keys) > 0 {
		s.cfg.PartitionAttr = keys[0]
	}
	s.mu.Lock()
	s.keyAttrs = keys
	s.mu.Unlock()

	if s.cfg.ReadRate > 0 {
		// Until requests tell the real cost, assume the table's average item, or 4 KB when the
		// (six-hourly) statistics are empty: small first pages rather than an overshoot.
		size := 4096.0
		if c, b := aws.ToInt64(t.ItemCount), aws.ToInt64(t.TableSizeBytes); c > 0 && b > 0 {
			size = float64(b) / float64(c)
		}
		perItem := size / 4096
		if !s.cfg.ConsistentRead {
			perItem /= 2
		}
		s.limiter = newReadLimiter(s.cfg.ReadRate, s.parallel, perItem)
	}
	s.projection, s.projNames = s.buildProjection(keys)
	return nil
}

func (s *Scanner) buildProjection(keys []string) (*string, map[string]string) {
	if s.cfg.Projection == nil {
		return nil, nil
	}
	attrs := slices.Clone(s.cfg.Projection)
	attrs = append(attrs, keys...)
	switch s.plan.Mode {
	case ModeFilter:
		attrs = append(attrs, s.cfg.PartitionAttr)
	case ModeIndex:
		attrs = append(attrs, s.cfg.ShardAttr)
	}
	names := make(map[string]string, len(attrs))
	expr := make([]byte, 0, 8*len(attrs))
	seen := make(map[string]bool, len(attrs))
	for _, a := range attrs {
		if a == "" || seen[a] {
			continue
		}
		seen[a] = true
		ph := "#p" + strconv.Itoa(len(names))
		names[ph] = a
		if len(expr) > 0 {
			expr = append(expr, ", "...)
		}
		expr = append(expr, ph...)
	}
	return aws.String(string(expr)), names
}

// response is what read needs of a Scan or Query output.
type response struct {
	items    []map[string]types.AttributeValue
	lek      map[string]types.AttributeValue
	scanned  int32
	consumed *types.ConsumedCapacity
}

// readUnlessSkipped asks BeforeSegment (when set) whether to read st, then reads it.
func (s *Scanner) readUnlessSkipped(ctx context.Context, st *stream, out chan<- *Page) error {
	if f := s.cfg.BeforeSegment; f != nil {
		ok, err := f(ctx, st.seg)
		if err != nil {
			return err
		}
		if !ok {
			s.mu.Lock()
			st.skipped = true
			s.mu.Unlock()
			return nil
		}
	}
	return s.read(ctx, st, out)
}

// read reads one segment from its start position to its end, handing pages to out.
func (s *Scanner) read(ctx context.Context, st *stream, out chan<- *Page) error {
	key := st.start
	countOpt := countThrottles(&st.throttles)
	for {
		select { // backpressure: a slot per unacknowledged page
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		limit := s.cfg.PageLimit
		var taken int
		if s.limiter != nil {
			if limit == 0 {
				limit = s.limiter.pageLimit()
			}
			var err error
			if taken, err = s.limiter.wait(ctx, s.limiter.estimate(limit)); err != nil {
				return err
			}
		}
		began := time.Now()
		res, err := s.fetch(ctx, st.seg, key, limit, countOpt)
		took := time.Since(began)
		if err != nil {
			return fmt.Errorf("scan: read segment %d of %q: %w", st.seg, s.cfg.Table, err)
		}
		rcu := consumedRCU(res, s.cfg.ConsistentRead)
		if s.limiter != nil {
			s.limiter.settle(taken, rcu, res.scanned)
		}

		page := &Page{Segment: st.seg}
		ps := &pageState{s: s, st: st, end: res.lek}
		for _, it := range res.items {
			if s.plan.Mode == ModeFilter && PartitionOf(it, s.cfg.PartitionAttr, s.plan.Slots) != s.cfg.Slot {
				continue
			}
			page.Items = append(page.Items, &Item{Attrs: it, page: ps})
		}
		ps.unacked.Store(int64(len(page.Items)))
		s.mu.Lock()
		st.pending = append(st.pending, ps)
		st.stats.Pages++
		st.stats.Scanned += int64(res.scanned)
		st.stats.Returned += int64(len(page.Items))
		st.stats.RCU += rcu
		st.stats.Duration += took
		s.mu.Unlock()

		if len(page.Items) == 0 {
			s.pageAcked(ps) // nothing to deliver: the position may pass it at once
		} else {
			select {
			case out <- page:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if len(res.lek) == 0 {
			return nil
		}
		key = res.lek
	}
}

func (s *Scanner) fetch(ctx context.Context, seg int, key map[string]types.AttributeValue, limit int32, opt func(*dynamodb.Options)) (response, error) {
	var lim *int32
	if limit > 0 {
		lim = aws.Int32(limit)
	}
	if s.plan.Mode == ModeIndex {
		names := map[string]string{"#shard": s.cfg.ShardAttr}
		for k, v := range s.projNames {
			names[k] = v
		}
		out, err := s.cfg.Client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.cfg.Table),
			IndexName:                 aws.String(s.cfg.IndexName),
			KeyConditionExpression:    aws.String("#shard = :shard"),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: map[string]types.AttributeValue{":shard": &types.AttributeValueMemberN{Value: strconv.Itoa(seg)}},
			ExclusiveStartKey:         key,
			Limit:                     lim,
			ProjectionExpression:      s.projection,
			ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		}, opt)
		if err != nil {
			return response{}, err
		}
		return response{out.Items, out.LastEvaluatedKey, out.ScannedCount, out.ConsumedCapacity}, nil
	}
	out, err := s.cfg.Client.Scan(ctx, &dynamodb.ScanInput{
		TableName:                aws.String(s.cfg.Table),
		Segment:                  aws.Int32(int32(seg)),
		TotalSegments:            aws.Int32(int32(s.total)),
		ExclusiveStartKey:        key,
		Limit:                    lim,
		ConsistentRead:           aws.Bool(s.cfg.ConsistentRead),
		ProjectionExpression:     s.projection,
		ExpressionAttributeNames: s.projNames,
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	}, opt)
	if err != nil {
		return response{}, err
	}
	return response{out.Items, out.LastEvaluatedKey, out.ScannedCount, out.ConsumedCapacity}, nil
}

// pageAcked runs once per page, when its last item is acknowledged (or at once for a page with
// none): it frees the page's backpressure slot and moves the segment's position past every
// leading fully acknowledged page.
func (s *Scanner) pageAcked(p *pageState) {
	<-s.sem
	st := p.st
	s.mu.Lock()
	moved := false
	for len(st.pending) > 0 && st.pending[0].unacked.Load() == 0 {
		head := st.pending[0]
		st.pending[0] = nil
		st.pending = st.pending[1:]
		if len(head.end) == 0 {
			st.acked, st.done = nil, true
		} else {
			st.acked = head.end
		}
		moved = true
	}
	if !moved || s.cfg.OnCheckpoint == nil {
		s.mu.Unlock()
		return
	}
	s.version++
	v, cp := s.version, s.checkpointLocked()
	s.mu.Unlock()

	s.cbMu.Lock()
	defer s.cbMu.Unlock()
	if v > s.cbVersion { // a later position may have been reported already
		s.cbVersion = v
		s.cfg.OnCheckpoint(cp)
	}
}

// KeyAttributes is a table's primary key attribute names: the partition key, then the sort key if
// there is one.
func KeyAttributes(schema []types.KeySchemaElement) []string {
	var keys []string
	for _, k := range schema {
		if k.KeyType == types.KeyTypeHash {
			keys = append([]string{aws.ToString(k.AttributeName)}, keys...)
		} else {
			keys = append(keys, aws.ToString(k.AttributeName))
		}
	}
	return keys
}
