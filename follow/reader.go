package follow

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dynapart/dynapart/configerr"
	"github.com/dynapart/dynapart/lock"
)

// StreamsClient is what the Reader calls; a *dynamodbstreams.Client has it, and tests wrap it or
// fake it.
type StreamsClient interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Clock is the time source of the Reader's waits and of ShardStat.Lag; lock.SystemClock (and any
// lock.Clock, such as the worker's) has it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// DefaultPollInterval is ReaderConfig.PollInterval's default.
const DefaultPollInterval = time.Second

// ReaderConfig configures a Reader. Streams, StreamARN, Locks and Group are required; every other
// field says its default.
type ReaderConfig struct {
	// Streams reads the stream. Required.
	Streams StreamsClient
	// StreamARN is the stream to read (the table's LatestStreamArn, see EnableStream). Required.
	StreamARN string
	// Locks leases the shards: shard s of the group is the mutex "<Group>#stream#<s>" (see
	// ShardMutex), whose checkpoint is the shard's position and whose finished flag says it was
	// read to its end. Required.
	Locks *lock.Client
	// Group names the readers that share the stream; each shard is read by one of them at a time.
	// Required.
	Group string
	// MaxShards is the most shards this reader takes while others may take them; 0: no limit. A
	// shard that stays free for overflowLooks looks in a row (its reader died, or the group has
	// fewer readers than MaxShards assumed) is taken beyond it, so no shard is left unread.
	MaxShards int
	// PollInterval is the wait before reading a shard again after GetRecords brought nothing new,
	// between looks for shards to take, and the first pause after a transient error (doubled per
	// failure, up to maxBackoff). Defaults to DefaultPollInterval (1s).
	PollInterval time.Duration
	// Clock is the time source. Defaults to lock.SystemClock.
	Clock Clock
	// Logger receives shard events and retried errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Rescanned is when the caller started to scan again what lost records held (a worker's
	// rescan after ErrTrimmed); zero (the default) when it did not. A shard whose checkpoint the
	// stream no longer holds is then read from its oldest record instead of ending Run with a
	// *TrimmedError, while the scan still covers what was lost: the stream keeps a record for
	// Retention, so records lost by now were written before now-Retention, which is before
	// Rescanned until Rescanned+Retention (less an hour, for the skew between the caller's clock
	// and DynamoDB's). A checkpoint this Reader saved itself is never
	// restarted (records after it were read after the scan began: a loss the scan did not cover).
	Rescanned time.Time
}

// Retention is how long DynamoDB Streams keeps a record: 24 hours.
const Retention = 24 * time.Hour

// overflowLooks is how many looks in a row a reader at MaxShards must see a shard free before it
// takes it: readers under their share take a free shard at their next look, so a shard left free
// that long has nobody else to read it.
const overflowLooks = 3

// maxBackoff bounds the pause between retries of a transient error.
const maxBackoff = 30 * time.Second

func (c ReaderConfig) withDefaults() ReaderConfig {
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Clock == nil {
		c.Clock = lock.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c ReaderConfig) validate() error {
	bad := func(field, format string, args ...any) error {
		return &configerr.Error{Pkg: "follow", Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Streams == nil:
		return bad("Streams", "required (a *dynamodbstreams.Client)")
	case c.StreamARN == "":
		return bad("StreamARN", "required (the table's LatestStreamArn)")
	case c.Locks == nil:
		return bad("Locks", "required (a *lock.Client on the lease table)")
	case c.Group == "":
		return bad("Group", "required")
	case c.MaxShards < 0:
		return bad("MaxShards", "must not be negative (0: no limit), got %d", c.MaxShards)
	case c.PollInterval < 0:
		return bad("PollInterval", "must be positive, got %s", c.PollInterval)
	}
	return nil
}

// ShardMutex is the name of the lock mutex that leases shard of group's stream.
func ShardMutex(group, shard string) string { return group + "#stream#" + shard }

// Reader reads a table's stream, sharing its shards with the other Readers of its Group. See the
// package documentation.
type Reader struct {
	cfg     ReaderConfig
	log     *slog.Logger
	stats   *statBook
	running atomic.Bool
	hooks   testHooks

	throughMu   sync.Mutex
	throughDone map[string]bool      // shards ReadThrough found finished
	listedAfter map[string]time.Time // per shard listed: the last look before the first that listed it
	lastListing time.Time            // when ReadThrough last listed the shards
}

// testHooks let the package's tests wait on events instead of polling. Nil in production.
type testHooks struct {
	held   func(shard string, held bool)  // a shard was taken (true), or let go and released (false)
	saved  func(shard, checkpoint string) // a checkpoint landed
	looked func()                         // a look for shards to take is over
}

// NewReader returns a Reader. It does not touch AWS. A bad config gives a *configerr.Error naming
// the field.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Reader{cfg: cfg, log: cfg.Logger.With("stream", cfg.StreamARN, "group", cfg.Group),
		stats: newStatBook(cfg.Clock), throughDone: map[string]bool{}}, nil
}

// Run takes shard leases and reads the shards until ctx ends, then returns ctx.Err(). fn is called
// for each non-empty batch of a shard, one batch per shard at a time: the shard's next GetRecords
// waits until the batch is Done, and its checkpoint is saved before that read. fn may be called
// concurrently for different shards; its ctx ends when the shard's lease is lost or Run stops, and
// fn must then return (Run waits for it).
//
// fn's error stops Run, which returns it, as it returns a *TrimmedError (ErrTrimmed) when records
// were lost and an error no retry cures. A lost shard lease stops that shard only. Transient errors
// are logged and retried. Run releases every shard lease it holds, and every goroutine it started
// has returned, before it returns.
func (r *Reader) Run(ctx context.Context, fn func(ctx context.Context, b *Batch) error) error {
	if fn == nil {
		return &configerr.Error{Pkg: "follow", Field: "fn", Reason: "required"}
	}
	if !r.running.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	defer r.running.Store(false)
	ru := newRun(ctx, r, fn)
	ru.loop()
	ru.stop(nil)
	ru.wg.Wait()
	if err := ru.failure(); err != nil {
		return err
	}
	return ctx.Err()
}

// Stats returns every shard of the reader's last listing of the stream, parents before children,
// and any other shard it holds. Safe to call at any time.
func (r *Reader) Stats() []ShardStat { return r.stats.snapshot() }

// wait waits d on the reader's clock; false when ctx ended first.
func (r *Reader) wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-r.cfg.Clock.After(d):
		return true
	}
}

// rescanCovers reports whether the caller's rescan (ReaderConfig.Rescanned) covers records the
// stream has lost by now.
func (r *Reader) rescanCovers() bool {
	at := r.cfg.Rescanned
	return !at.IsZero() && r.cfg.Clock.Now().Before(at.Add(SafeAge(Retention)))
}

// SafeAge is how long after it was written a record is surely still in a stream that keeps
// records for retention, judged by a clock that may be skewed from DynamoDB's: the retention less
// a margin of one 24th (an hour of 24), for that skew and for the time a reader takes to start.
func SafeAge(retention time.Duration) time.Duration { return retention - retention/24 }

// backoff is the pause before the next try after failures transient errors in a row.
func (r *Reader) backoff(failures int) time.Duration {
	return min(r.cfg.PollInterval<<min(max(failures-1, 0), 10), maxBackoff)
}
