package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/clock"
)

var errOutage = errors.New("test: source table unreachable")

// outageDB is a worker's client that fails every Scan of one table while down is set: the lease
// table stays reachable, so the holder keeps its lease and its passes fail. While describeDown is
// set it fails every DescribeTable (a worker's start reads).
type outageDB struct {
	DynamoDBClient
	table        string
	down         atomic.Bool
	describeDown atomic.Bool
	describes    atomic.Int32 // DescribeTable calls
}

func newOutageDB(db ddbfault.Next, table string) *outageDB {
	fc := ddbfault.New(db)
	o := &outageDB{DynamoDBClient: workerClient(fc), table: table}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		o.describes.Add(1)
		if o.describeDown.Load() {
			return nil, errOutage
		}
		return send(ctx, call.In)
	}, ddbfault.OpDescribeTable)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if o.down.Load() && call.Tables[0] == o.table {
			return nil, errOutage
		}
		return send(ctx, call.In)
	}, ddbfault.OpScan)
	return o
}

// backoffClock is a fake clock that reports every short wait it is asked for (the backoff between
// failed passes; every other timer of the test is an hour or more), after registering it.
type backoffClock struct {
	*clock.Fake
	waits chan time.Duration
}

const shortWait = 40 * time.Second // above the largest backoff between passes (30s + 20% jitter)

func (c *backoffClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	c.report(d)
	return ch
}

func (c *backoffClock) AfterFunc(d time.Duration, f func()) func() bool {
	stop := c.Fake.AfterFunc(d, f)
	c.report(d)
	return stop
}

func (c *backoffClock) report(d time.Duration) {
	if d > 0 && d <= shortWait {
		c.waits <- d
	}
}

// outageRun runs a once-worker whose source table is down; onWait is called for every backoff
// wait (with the number of waits so far) before the clock moves past it. It returns Run's error
// and the fake time the run took.
func outageRun(t *testing.T, mutate func(*Config), onWait func(n int, db *outageDB)) (*Worker, error, time.Duration) {
	return outageRunFrom(t, func(db *outageDB) { db.down.Store(true) }, mutate, onWait)
}

// outageRunFrom is outageRun with the outage's start set by down.
func outageRunFrom(t *testing.T, down func(*outageDB), mutate func(*Config), onWait func(n int, db *outageDB)) (*Worker, error, time.Duration) {
	f := newFixture(t, 3)
	db := newOutageDB(f.db, f.table)
	down(db)
	clk := &backoffClock{Fake: newTestClock(), waits: make(chan time.Duration, 16)}
	start := clk.Now()
	c := f.config(LedgerInline)
	c.Client, c.Clock, c.Workers, c.Once = db, clk, 1, true
	c.LeaseTTL, c.Heartbeat, c.ClaimTTL = time.Hour, 10*time.Minute, time.Hour
	c.CheckpointInterval, c.PollInterval = time.Hour, time.Hour
	if mutate != nil {
		mutate(&c)
	}
	w, err := New(c)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background(), func(context.Context, Item) error { return nil }) }()
	for n := 1; ; n++ {
		select {
		case err := <-done:
			return w, err, clk.Now().Sub(start)
		case d := <-clk.waits:
			onWait(n, db)
			clk.Advance(d)
		case <-time.After(failsafe):
			t.Fatal("timed out waiting for the worker")
		}
	}
}

const failsafe = 30 * time.Second

// A holder outlives an outage of DynamoDB longer than 10 failed passes: once the table is back it
// finishes its share.
func TestHolderOutlivesAnOutage(t *testing.T) {
	w, err, took := outageRun(t, nil, func(n int, db *outageDB) {
		if n == 15 {
			db.down.Store(false)
		}
	})
	require.NoError(t, err)
	require.EqualValues(t, 3, w.Stats().Completed)
	require.Greater(t, took, 3*time.Minute, "the outage lasted 15 failed passes")
}

// Config.OutageTimeout bounds it: passes failing for longer end Run with the last error.
func TestHolderGivesUpAfterOutageTimeout(t *testing.T) {
	_, err, took := outageRun(t, func(c *Config) { c.OutageTimeout = 2 * time.Minute }, func(int, *outageDB) {})
	require.ErrorIs(t, err, errOutage)
	require.GreaterOrEqual(t, took, 2*time.Minute)
	require.Less(t, took, 2*time.Minute+shortWait)
}

// A worker started while DynamoDB is out (its start reads fail) waits for it, like a standby,
// instead of exiting: once the tables answer it joins its group and finishes its share.
func TestStartOutlivesAnOutage(t *testing.T) {
	var describesWhenBack int32
	w, err, took := outageRunFrom(t, func(db *outageDB) { db.describeDown.Store(true) }, nil, func(n int, db *outageDB) {
		if n == 6 {
			describesWhenBack = db.describes.Load()
			db.describeDown.Store(false)
		}
	})
	require.NoError(t, err)
	require.EqualValues(t, 3, w.Stats().Completed)
	require.GreaterOrEqual(t, describesWhenBack, int32(6*2), "six rounds of start reads (source and lease table) failed")
	require.Greater(t, took, 30*time.Second, "the waits between rounds grow: 1s, 2s, 4s, 8s, 16s, 30s")
}

// Config.OutageTimeout bounds the start's wait too: Run returns the reads' error.
func TestStartGivesUpAfterOutageTimeout(t *testing.T) {
	_, err, took := outageRunFrom(t, func(db *outageDB) { db.describeDown.Store(true) },
		func(c *Config) { c.OutageTimeout = 2 * time.Minute }, func(int, *outageDB) {})
	require.ErrorIs(t, err, errOutage)
	require.ErrorContains(t, err, "giving up on the start reads after", "the error says the worker gave up")
	require.GreaterOrEqual(t, took, 2*time.Minute)
	require.Less(t, took, 2*time.Minute+shortWait)
}

// A table that does not exist is not an outage: the start reports it at once, without a wait.
func TestStartDoesNotRetryAMissingTable(t *testing.T) {
	_, err, took := outageRunFrom(t, func(*outageDB) {}, func(c *Config) { c.Table = "no-such-table" }, func(int, *outageDB) {
		t.Error("the worker waited to read a missing table again")
	})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Table", ce.Field)
	require.Zero(t, took)
}
