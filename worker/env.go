package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// env is what Run prepares once, before its first slot: the table's key, the lock client, the ledger
// and the group's settings (see prepare and joinGroup). Every slot of the run shares it.
type env struct {
	keyAttrs []string
	// source is the source table as the worker described it when it started (at describedAt);
	// passes give it to their scanners while it is fresh (see sourceDescription).
	source      *types.TableDescription
	describedAt time.Time
	locks       *lock.Client
	ledger      Ledger
	// meta and metaDefaults are the group settings every acquisition records or compares (see
	// groupMeta); total is the group's segment count; joined says the group exists, so
	// acquisitions join it at its current n (see joinGroup).
	meta, metaDefaults map[string]string
	total              int
	joined             bool
	n                  int // the group's n when Run started (Workers for a new group)
	// started is the group's state as the start read it (at describedAt), which HandleRecords
	// uses instead of a read of its own while it is fresh (see slot.recordsGroupState).
	started lock.GroupState

	streamMu  sync.Mutex
	streamARN string // the source table's stream (Follow); see followedStream and slot.trimmed
	// streamBegan is when that stream was turned on (its label; zero when the label is not a
	// time): it holds no record of a change made before (see slot.outlivedRetention).
	streamBegan time.Time
}

// stream is the source table's stream the workers follow.
func (e *env) stream() string {
	e.streamMu.Lock()
	defer e.streamMu.Unlock()
	return e.streamARN
}

// began is when the stream the workers follow was turned on (zero when not known).
func (e *env) began() time.Time {
	e.streamMu.Lock()
	defer e.streamMu.Unlock()
	return e.streamBegan
}

// prepare reads what Run needs before its first slot (the start reads, sent together and retried
// through an outage), checks it, and builds the run's env; what no wait cures is returned.
func (w *Worker) prepare(ctx context.Context) (*env, error) {
	c := w.cfg
	locks, lockErr := w.lockClient()
	r := w.readStartThroughOutage(ctx, locks)
	if r.sourceErr != nil {
		return nil, r.sourceErr
	}
	keyAttrs := scan.KeyAttributes(r.source.KeySchema)
	if c.Mode == scan.ModeIndex {
		if problem := scan.PendingIndexProblem(r.source, c.IndexName); problem != "" {
			return nil, &ConfigError{Pkg: "dynapart", Field: "IndexName", Reason: fmt.Sprintf("table %q %s (create it with scan.CreatePendingIndex or `dynapart init --index`)", c.Table, problem)}
		}
	}
	if r.leaseErr != nil {
		return nil, leaseTableErr(r.leaseErr)
	}
	l, err := w.newLedger(r, keyAttrs)
	if err != nil {
		return nil, err
	}
	if lockErr != nil {
		return nil, lockErr
	}
	w.useLedger(l)
	e := &env{keyAttrs: keyAttrs, source: r.source, describedAt: c.Clock.Now(), locks: locks, ledger: l}
	if c.Follow {
		if e.streamARN, err = followedStream(c.Table, r.source); err != nil {
			return nil, err
		}
		e.streamBegan = streamBegan(r.source)
	}
	if r.groupErr != nil {
		return nil, r.groupErr
	}
	if err := w.joinGroup(e, r.group); err != nil {
		return nil, err
	}
	e.started = r.group
	// A budget on the group: the holder reads and reports at its interval from the start.
	w.budgetFound(r.group.Budget.Set())
	return e, nil
}

// useLedger makes l the worker's ledger for this Run, keeping what an earlier Run's ledger
// consumed in Stats (and so in the budget's reports, which send differences of Stats).
func (w *Worker) useLedger(l Ledger) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ledger != nil {
		w.ledgerWCU += w.ledger.ConsumedWCU()
		w.ledgerRCU += w.ledger.ConsumedRCU()
	}
	w.ledger = l
}

// newLedger is the worker's ledger over the source table's key attributes: the ledger table
// described in r, or the inline ledger.
func (w *Worker) newLedger(r *startReads, keyAttrs []string) (Ledger, error) {
	c := w.cfg
	if c.Ledger == LedgerTable {
		if r.ledgerErr != nil {
			return nil, r.ledgerErr
		}
		if err := ledger.CheckTableSchema(c.LedgerTable, r.ledger); err != nil {
			return nil, &ConfigError{Pkg: "dynapart", Field: "LedgerTable", Reason: err.Error(), Err: err}
		}
	}
	return ledgerOf(c, keyAttrs, ledger.WithWriteGate(w.gate))
}

// ledgerOf is the ledger of a worker with Config c (defaults applied) over keyAttrs: the ledger
// table's (c.Ledger is LedgerTable) or the inline ledger, with every setting of c that shapes its
// writes, and opts.
func ledgerOf(c Config, keyAttrs []string, opts ...ledger.Option) (Ledger, error) {
	opts = append(opts, ledgerOptions(c)...)
	if c.Ledger == LedgerTable {
		return ledger.NewTable(c.Client, c.LedgerTable, c.Job, c.Table, keyAttrs, opts...)
	}
	opts = append(opts, ledger.WithPrefix(c.AttrPrefix))
	if c.Mode == scan.ModeIndex {
		opts = append(opts, ledger.WithRemoveOnDone(c.ShardAttr))
	}
	return ledger.NewInline(c.Client, c.Table, keyAttrs, opts...)
}

// ledgerOptions are the ledger settings of every worker ledger besides its write gate: the clock
// skew claims are padded with, the reserved lease table, the complete-only audit, transactions
// instead of statement batches, and versions.
func ledgerOptions(c Config) []ledger.Option {
	opts := []ledger.Option{ledger.WithMaxClockSkew(c.MaxClockSkew), ledger.WithReservedTables(c.LeaseTable)}
	if c.CompleteOnlyAudit {
		opts = append(opts, ledger.WithCompleteOnlyAudit())
	}
	if c.TransactionBatches {
		opts = append(opts, ledger.WithoutStatementBatches())
	}
	if c.Versions {
		opts = append(opts, ledger.WithVersions())
	}
	return opts
}

// lockClient is the worker's client of the lease table.
func (w *Worker) lockClient() (*lock.Client, error) {
	c := w.cfg
	return lock.New(c.Client, c.LeaseTable,
		lock.WithOwner(c.Owner), lock.WithLeaseTTL(c.LeaseTTL), lock.WithHeartbeat(c.Heartbeat),
		lock.WithMaxClockSkew(c.MaxClockSkew), lock.WithPollInterval(c.StandbyPoll),
		lock.WithClock(c.Clock), lock.WithLogger(c.Logger))
}

// describeOnly lets lock.CheckTable read a table's description through the worker's client; a
// worker never creates tables.
type describeOnly struct{ DynamoDBClient }

func (describeOnly) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return nil, errors.New("dynapart: a worker does not create tables")
}

// describeTable describes a table the worker needs; a missing one is a *ConfigError naming field.
func describeTable(ctx context.Context, db DynamoDBClient, table, field string) (*types.TableDescription, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, &ConfigError{Pkg: "dynapart", Field: field, Reason: fmt.Sprintf("table %q does not exist (create it with `dynapart init`)", table), Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("dynapart: describe table %q: %w", table, err)
	}
	return out.Table, nil
}
