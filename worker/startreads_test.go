package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/stretchr/testify/require"
)

// startDB is a worker's client that holds the source table's DescribeTable until the group is
// being read (so the two must be in flight together), and counts what a Run sends before its first
// item write.
type startDB struct {
	DynamoDBClient
	source, leases string
	metaRead       chan struct{}
	metaOnce       sync.Once
	waitedOut      atomic.Bool // the DescribeTable gave up waiting: the reads went one by one

	mu          sync.Mutex
	firstWrite  bool
	described   map[string]int // DescribeTable calls per table, in the whole Run
	readsBefore []string       // reads of the lease table before the first item write
}

func newStartDB(db ddbfault.Next, source, leases string) *startDB {
	fc := ddbfault.New(db)
	d := &startDB{DynamoDBClient: workerClient(fc), source: source, leases: leases, metaRead: make(chan struct{}), described: map[string]int{}}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		table := call.Tables[0]
		switch call.Op {
		case ddbfault.OpDescribeTable:
			d.describe(table)
		case ddbfault.OpGetItem, ddbfault.OpQuery:
			d.leaseRead(table, call.Op)
		case ddbfault.OpUpdateItem:
			if table == d.source {
				d.mu.Lock()
				d.firstWrite = true
				d.mu.Unlock()
			}
		}
		return send(ctx, call.In)
	}, ddbfault.OpDescribeTable, ddbfault.OpGetItem, ddbfault.OpQuery, ddbfault.OpUpdateItem)
	return d
}

// describe counts a DescribeTable of table, and holds the source table's first until the group is
// being read.
func (d *startDB) describe(table string) {
	d.mu.Lock()
	d.described[table]++
	first := d.described[d.source] == 1 && table == d.source
	d.mu.Unlock()
	if first {
		select {
		case <-d.metaRead:
		case <-time.After(10 * time.Second):
			d.waitedOut.Store(true)
		}
	}
}

// leaseRead lets the held DescribeTable go on at the first read of the lease table, and records
// the reads before the first item write.
func (d *startDB) leaseRead(table, op string) {
	if table != d.leases {
		return
	}
	d.metaOnce.Do(func() { close(d.metaRead) })
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.firstWrite {
		d.readsBefore = append(d.readsBefore, op)
	}
}

// TestStartReadsGoTogether: a worker sends the reads it starts with (the source table's and the
// lease table's descriptions, the group's meta item with its slots) together, not one after the
// other, describes the source table once per Run (its passes' scanners reuse that description),
// and reads the lease table no more before its first item: the first acquisition round uses the
// start's read of the group, and the first holder of a new group reads the plan from its own meta
// write (see TestOneSlotEndsInThreeRoundTrips). These are the round trips a Lambda invocation
// pays before its first item.
func TestStartReadsGoTogether(t *testing.T) {
	f := newFixture(t, 5)
	db := newStartDB(f.db, f.table, f.leaseTable)
	c := fastTimings(f.config(LedgerInline))
	c.Client, c.Workers, c.Once, c.CompleteOnly = db, 1, true, true
	c.StandbyPoll = 2 * time.Second // the start's read of the group stays fresh for the first round
	w, err := New(c)
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, 30*time.Second))
	require.Equal(t, int64(5), w.Stats().Completed)

	require.False(t, db.waitedOut.Load(), "the source table's DescribeTable went out alone: the group's meta item was not read alongside it")
	require.Equal(t, 1, db.described[f.table], "DescribeTable calls on the source table in one Run")
	require.Equal(t, 1, db.described[f.leaseTable], "DescribeTable calls on the lease table in one Run")
	require.Equal(t, []string{"Query"}, db.readsBefore, "reads of the lease table before the first item write: the group, at start")
}
