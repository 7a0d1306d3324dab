package scan

import (
	"context"
	"errors"
	"fmt"
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

// Page is one response's worth of items kept for this slot, delivered to Run's callback.
type Page struct {
	Segment int // the scan segment, or the shard in index mode
	Items   []*Item
}

// KeyAttrs returns the table's key attribute names, partition key first, once Run has described
// the table; nil before.
func (s *Scanner) KeyAttrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keyAttrs)
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
	if s.plan.Mode == ModeIndex {
		if problem := PendingIndexProblem(t, s.cfg.IndexName); problem != "" {
			return &ConfigError{Pkg: "scan", Field: "IndexName", Reason: fmt.Sprintf("table %q %s (see CreatePendingIndex)", s.cfg.Table, problem)}
		}
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
