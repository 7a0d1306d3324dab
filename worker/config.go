package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// DynamoDBClient is every DynamoDB call the worker makes (through lock, scan and the ledgers); any
// *dynamodb.Client fits, and tests wrap it to inject faults.
type DynamoDBClient interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	// BatchExecuteStatement carries batched claims and completions (PartiQL UPDATEs, 1 WCU per
	// item, where a transaction costs 2).
	BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error)
}

// LedgerKind selects where item state is kept.
type LedgerKind string

const (
	// LedgerInline keeps the state as attributes on the item itself (prefix AttrPrefix).
	LedgerInline LedgerKind = "inline"
	// LedgerTable keeps the state in a separate table keyed by (job, item key); the source table is
	// only read, and a new Job processes every item again.
	LedgerTable LedgerKind = "table"
)

// Default table names.
const (
	DefaultLeaseTable  = "dynapart-leases"
	DefaultLedgerTable = "dynapart-ledger"
)

// Config configures a Worker. Only Client and Table are required; every other field says its
// default. [Settings] has a row for each field (but Client, Logger, Clock and Hooks) with its
// default, its `dynapart work` flag and how a group records it: a new field needs its row.
type Config struct {
	// Client talks to DynamoDB. Required.
	Client DynamoDBClient
	// Table is the source table whose items are processed. Required.
	Table string
	// LeaseTable holds the slot leases (see lock.CreateTable). Defaults to "dynapart-leases".
	LeaseTable string
	// Group names the set of slots the workers share. Defaults to Table + "/" + Job.
	Group string
	// Workers is N, the number of slots (workers beyond N wait as hot standbys). 0 joins the group
	// at its current N (the group must exist: a worker with Workers set created it); a Workers that
	// disagrees with an existing group is refused with a *lock.GroupMismatchError (Field "n"): a
	// running group changes size only through lock.Client.ResizeGroup (Resize, `dynapart scale`).
	// A worker that found no group when it started, and meets it resized (a standby of the first
	// fleet), joins it at its current N.
	Workers int
	// Segments is the group's fixed number of parallel-scan segments in segment and filter mode,
	// recorded when the group is created: the group can be scaled up to that many slots, and a
	// resize moves whole segments with their cursors. 0 takes the group's count when it exists,
	// and scan.DefaultTotal(Workers, SubSegments) (at least 64) for a new group. Every segment is
	// at least one scan request per pass: a small table that will never need many workers is read
	// in fewer, fuller pages with Workers x SubSegments. Ignored in index mode, whose units are the
	// Shards.
	Segments int

	// Mode is how a slot finds its share: scan.ModeSegment (parallel scan segments), scan.ModeFilter
	// (scan and keep items whose partition attribute maps to the slot) or scan.ModeIndex (query a
	// sparse pending index). Defaults to scan.ModeSegment.
	Mode scan.Mode
	// SubSegments is the number of scan requests a slot has in flight (its segments, or in index
	// mode its shards, are read that many at a time). Defaults to 4. At most 1,000,000.
	SubSegments int
	// PartitionAttr is the attribute filter mode partitions by. Defaults to the table's partition key.
	PartitionAttr string
	// IndexName, ShardAttr and Shards describe the sparse pending index of index mode. IndexName
	// defaults to "dp_pending", ShardAttr to "dp_shard", Shards to 16 (must be >= Workers and
	// <= 1,000,000).
	IndexName string
	ShardAttr string
	Shards    int
	// ConsistentRead makes the scan strongly consistent; not in index mode. Defaults to false.
	ConsistentRead bool
	// Projection limits the attributes read to these (keys and ledger attributes are always read).
	// Defaults to all attributes.
	Projection []string
	// ReadRate limits this worker's scan to so many RCU per second. Defaults to 0 (unlimited).
	ReadRate float64
	// WriteRate limits this worker's ledger writes (claims, completions, retries, dead letters,
	// releases, leaving the pending index; not lease heartbeats or checkpoints) to so many WCU per
	// second, as DynamoDB reports them (ConsumedCapacity): each write waits for its estimated cost
	// (1 WCU per KB of the update, twice in a transaction) and is settled on what it consumed
	// (at least 1 WCU a write, 2 per item of a transaction). It
	// adapts: a throttled write halves the allowed rate, which climbs back by WriteRate/10 each
	// second without one (Stats.WriteThrottles, Stats.WriteRateAllowed). Defaults to 0 (unlimited).
	WriteRate float64
	// MaxWCU and MaxRCU record a capacity budget on the group (lock.SetBudget, when the worker
	// first holds a slot): the write units (ledger writes) and read units (Stats.RCU) the group's workers
	// may consume in all. While the group has a budget each slot holder adds its consumption to
	// the group's every BudgetInterval (one write), and the holder that finds the budget reached
	// pauses the group (lock.PauseForBudget): no new claims, handlers in flight finish, slots kept,
	// until an operator raises the budget and resumes. A budget below what the group has consumed
	// is refused (Run returns a *lock.BudgetBelowUsageError). Defaults to 0 (no budget; a budget
	// already on the group stays).
	MaxWCU, MaxRCU float64
	// BudgetInterval is how often a slot holder of a group with a budget reports its consumption
	// (the reports ride on its reads of the group's meta item, every Heartbeat; a shorter
	// BudgetInterval makes those reads that frequent too, at most four a second). A worker also
	// reports what is left when Run ends, when it saw a budget on the group (in Run's first read
	// of the group, or later as a holder): a budget recorded after that first read, in a run
	// shorter than a heartbeat, goes unreported by that worker. Defaults to 5s.
	BudgetInterval time.Duration
	// PageSize is the number of items a scan request evaluates. Smaller pages checkpoint more
	// often (a successor rescans less), larger ones cost fewer requests. Defaults to 1000 (or the
	// scan package's automatic size when ReadRate is set).
	PageSize int32

	// Concurrency is the number of handlers in flight, at most 100,000. Defaults to 16. Each
	// handler's writes need a connection: the SDK's default HTTP client keeps 10 idle per host
	// and dials again for the rest, so give Client's HTTP client a pool of at least Concurrency
	// (MaxIdleConnsPerHost; the CLI's keeps 1024).
	Concurrency int
	// BatchClaims claims up to 25 items of a page in one request instead of one UpdateItem per
	// item, and completes handled items the same way (up to max(Concurrency, 25) wait for their
	// completion: a crash runs those again). The request is a PartiQL statement batch
	// (BatchExecuteStatement): each claim and completion a single conditional write at 1 WCU per
	// item, settled on its own answer. Fresh items (the scan saw no state on them) are claimed
	// this way, an UPDATE of the inline ledger's item; items with a state (a retry, an expired
	// claim) are claimed one UpdateItem each, and so is every item with the table ledger, whose
	// state the scan does not see (its completions are batched; with TransactionBatches its
	// claims go in transactions, read back for their attempt numbers). Defaults to false.
	BatchClaims bool
	// TransactionBatches writes BatchClaims' batches as TransactWriteItems (2 WCU per item) instead
	// of statement batches, for a DynamoDB without PartiQL conditions (moto). A worker falls back on
	// its own when statement batches keep failing as a whole. Defaults to false.
	TransactionBatches bool
	// CompleteOnly skips the claim: each item is handled and then completed with one conditional
	// write, for handlers that are themselves one conditional write. A handler error is recorded as
	// in claim mode: the attempt is counted and the item retried after RetryBackoff (RetryAfter
	// honoured), or dead-lettered on a Permanent error or at MaxAttempts. Item.Attempt is the
	// recorded attempts + 1, and items already done or failed are skipped before their handler:
	// the inline ledger reads both from the scanned item, the table ledger with one BatchGetItem
	// per 100 items of a page (and, with Versions, each item again after its row, so that the
	// handler never gets content older than the state its write is fenced on). The completing
	// write sets only the status, done_at, its own id (the claim attribute) and, with Versions,
	// the version (see CompleteOnlyAudit). Defaults to false.
	CompleteOnly bool
	// CompleteOnlyAudit makes complete-only completions also record who completed the item (owner,
	// slot, lease token) and count the successful attempt in attempts, as a claim does, for audits:
	// a longer write. Failed attempts are counted either way. Defaults to false.
	CompleteOnlyAudit bool

	// LeaseTTL is the slot lease's time to live; it must exceed 2 x Heartbeat. Defaults to 10s.
	LeaseTTL time.Duration
	// Heartbeat is how often the lease is renewed. Defaults to LeaseTTL / 3.
	Heartbeat time.Duration
	// MaxClockSkew is the clock difference tolerated between workers: added to a claim's stored
	// expiry, and taken from the due time of an item reopened for a new version (Follow) or whose
	// claim is given back unhandled (a shutdown, a pause, a claim of unknown outcome undone), so
	// that every worker finds it due at once. MaxClockSkew + Heartbeat must be less than
	// LeaseTTL. Defaults to 1s.
	MaxClockSkew time.Duration
	// StandbyPoll is how often a standby looks for a free slot. Defaults to 1s.
	StandbyPoll time.Duration
	// ClaimTTL is how long a claim protects an item. The handler's context is cancelled shortly
	// before. Defaults to 1m.
	ClaimTTL time.Duration
	// MaxAttempts is the number of attempts before an item is dead-lettered. Defaults to 5.
	MaxAttempts int
	// RetryBackoff is the delay before the second attempt; it doubles per attempt (with jitter) up to
	// MaxRetryBackoff. Defaults to 1s and 5m.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration

	// Once processes the slot's share one time (after retries have settled), then takes any other
	// free, unfinished slot of the group the same way, and returns once every slot is finished or
	// held by a live worker (one that renews its lease: a held slot whose lease runs out unrenewed,
	// its holder dead, is taken over; so a once-worker watches the held slots for about one
	// Heartbeat before it returns); otherwise the worker rescans every PollInterval until ctx ends.
	// Defaults to false (continuous).
	Once bool
	// NoSteal stops a once-worker from stealing: by default, once its slot is finished and no
	// free unfinished slot is left, it takes scan units (segments, or shards in index mode) not
	// yet started from slots still working, a few at a time from the end of their share, so that a
	// skewed table ends close to a balanced one. Every once-worker of a group of more than one
	// slot, also with NoSteal, marks each unit before reading it (one conditional write to the
	// lease table per unit per pass), which keeps units exclusive; a one-slot group has no thief
	// and writes no markers. Continuous workers never steal. Defaults to false.
	NoSteal bool
	// Follow makes a continuous worker follow the table's DynamoDB stream after its share's first
	// full pass, instead of scanning again every PollInterval: every new version of an item (its
	// content: every attribute but the ledger's) is handled once, whoever brings it (the pass or
	// the stream), and a version superseded before a worker got to it may be skipped, never
	// handled after a newer one. The table needs a stream with new and old images (`dynapart init
	// --stream`, follow.EnableStream), turned on before the first pass starts. The stream's shards
	// are leased among the group's workers (lock mutexes) and checkpointed under their leases.
	// Segment and filter mode; not with Once or Projection (a version is the whole item). Implies
	// Versions. Defaults to false. See follow.go.
	Follow bool
	// Versions makes every write that finishes an item record the version of the content its
	// handler had (ledger.WithVersions), so that a stream tail run after or beside this job (Follow,
	// or awslambda.StreamHandler) does not handle again what it handled. A claimed item's handler
	// then gets the item as of its claim (the inline ledger's single claim returns it; the table
	// ledger and BatchClaims read it after the claim), not as the scan page had it: a follower
	// beside this job may have finished that content and reopened the item for a newer one since.
	// Every worker of a group must agree (the group records it). Implied by Follow. Defaults to
	// false.
	Versions bool
	// Streams is the DynamoDB Streams client Follow reads with (a *dynamodbstreams.Client for
	// the same region and endpoint as Client). Required with Follow.
	Streams follow.StreamsClient
	// StreamPoll is how often a worker that follows the stream reads a shard that had nothing new
	// (DynamoDB Streams allows 5 reads a second per shard), and the longest wait before a
	// candidate held by another worker's claim is looked at again. Defaults to 1s.
	StreamPoll time.Duration
	// PollInterval is the pause between passes in continuous mode, and the longest wait between
	// passes of a once job that has retries pending. Defaults to 30s (continuous) / 5s (once).
	PollInterval time.Duration
	// CheckpointInterval is how often the scan position is saved on the lease. Defaults to 1s.
	CheckpointInterval time.Duration
	// OutageTimeout is how long a slot holder keeps retrying passes that fail (DynamoDB
	// unreachable or throttled beyond the SDK's retries, or a ledger write, an effect commit or a
	// versioned read of an item that DynamoDB refuses for every item alike: AccessDeniedException,
	// a table gone) before Run gives up and returns the last error. It is measured on the worker's
	// clock from the first failure of a run of failed passes; a pass that succeeds starts the count
	// again (but one that only resumed a pass a refusal ended: it went past the refused items), and
	// so does a follower's failure after it followed the stream for longer than OutageTimeout.
	// Between failed passes the holder keeps its lease (while the heartbeat gets through) and waits
	// 1s, doubling up to 30s. A negative value retries for ever, like a standby. A *ConfigError ends
	// Run at once. A worker whose start reads (the tables' descriptions, the group) fail the same
	// way retries them on the same terms, and so does a once-worker whose reads of the group fail
	// while it watches the held slots before it returns (Once). Defaults to 15m.
	OutageTimeout time.Duration
	// DrainTimeout is how long handlers in flight may finish after shutdown starts. Defaults to 10s.
	DrainTimeout time.Duration
	// HandlerGrace is how long a handler may keep running after its context was cancelled (its
	// claim about to expire, the lease lost, or DrainTimeout passed) before the worker abandons
	// it: the handler is counted in Stats.Abandoned and logged, its goroutine is left running, and
	// the item is left to be claimed again once its claim expires. So a handler that ignores its
	// context cannot keep Run from returning. Defaults to 5s.
	HandlerGrace time.Duration
	// DeadlineMargin: when ctx has a deadline (Lambda), claiming stops this long before it, leaving
	// time to drain, checkpoint and release: DrainTimeout plus the release must fit in it, which
	// package awslambda enforces (its DrainTimeout defaults to the margin minus min(margin/2, 1s);
	// a longer one is a ConfigError). Defaults to 2s.
	DeadlineMargin time.Duration
	// WriteTimeout bounds each write that records an item's outcome (claim, complete, retry, dead
	// letter, release). These writes are not cut short by shutdown, so a graceful stop never
	// leaves an outcome unknown; WriteTimeout bounds how long a stop waits on an unreachable
	// DynamoDB. They end with the slot's lease: none (nor the SDK's repeat of one) is sent once
	// the lease is lost or expired by the worker's clock. Defaults to 30s.
	WriteTimeout time.Duration
	// LeaseWriteTimeout bounds each lease write that must outlive a shutdown: saving the
	// checkpoint, marking the slot finished, releasing the lease. Defaults to 10s.
	LeaseWriteTimeout time.Duration

	// Job names the job; with the table ledger a new job processes everything again. Defaults to
	// "default".
	Job string
	// Ledger selects the ledger. Defaults to LedgerInline.
	Ledger LedgerKind
	// LedgerTable is the table ledger's table. Defaults to "dynapart-ledger".
	LedgerTable string
	// AttrPrefix is the inline ledger's attribute prefix. Defaults to "dp_".
	AttrPrefix string

	// Owner identifies this worker in leases and claims. Defaults to hostname-pid-random.
	Owner string
	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Clock drives lease and claim timing (see lock.Clock to implement one, e.g. a fake for tests).
	// Defaults to lock.SystemClock.
	Clock lock.Clock
	// Hooks receive events for metrics. Defaults to none.
	Hooks Hooks
}

// Hooks are called synchronously from the worker's goroutines; they must be fast and safe for
// concurrent use.
type Hooks struct {
	// OnItem is called when a claim is won and once per item outcome.
	OnItem func(ItemEvent)
	// OnLease is called when the worker's lease changes.
	OnLease func(LeaseEvent)
}

// Outcome is what became of an item.
type Outcome string

// Item outcomes. OutcomeClaimed is reported when a claim is won, before the handler runs; every
// claimed item later reports one of the others (unless its worker dies).
const (
	OutcomeClaimed      Outcome = "claimed"
	OutcomeCompleted    Outcome = "completed"
	OutcomeRetried      Outcome = "retried"
	OutcomeDeadLettered Outcome = "dead_lettered"
	OutcomeReleased     Outcome = "released"
	OutcomeClaimLost    Outcome = "claim_lost"
	OutcomeSkipped      Outcome = "skipped" // done, failed, held by another worker or not yet due
	// OutcomeUnprocessable: the item cannot be claimed at all (DynamoDB refuses the write as
	// invalid, e.g. an item too large to carry the inline ledger's attributes). It stays pending.
	OutcomeUnprocessable Outcome = "unprocessable"
	// OutcomeAbandoned: the handler ignored its cancelled context for HandlerGrace and was given
	// up on; the item is claimed again once its claim expires.
	OutcomeAbandoned Outcome = "abandoned"
	// OutcomeUnknown: the write recording the handler's outcome (complete, retry or dead letter)
	// got no answer, e.g. the lease ended while it was in flight, and a read could not show it
	// applied. It may still have landed; a later pass finds the item finished, or claims it again
	// once the claim has expired.
	OutcomeUnknown Outcome = "unknown"
)

// ItemEvent reports one item's outcome.
type ItemEvent struct {
	Outcome  Outcome
	Key      Key
	Slot     int
	Attempt  int
	Duration time.Duration // handler time, 0 when no handler ran
}

// LeaseEvent reports a lease change.
type LeaseEvent struct {
	Kind     LeaseEventKind
	Slot     int
	Token    int64
	TookOver bool
}

// LeaseEventKind says what happened to a lease (LeaseEvent.Kind).
type LeaseEventKind string

// The kinds of lease events.
const (
	LeaseAcquired LeaseEventKind = "acquired" // a slot was taken (LeaseEvent.TookOver: from a dead holder)
	LeaseLost     LeaseEventKind = "lost"     // the lease expired or was taken over; work under it was cancelled
	LeaseReleased LeaseEventKind = "released" // the lease was given back (shutdown or deadline)
	LeaseFinished LeaseEventKind = "finished" // the slot was marked finished (Once)
)
