package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/lock"
)

// endDB is a worker's client that records the requests a Run sends to the lease table before its
// first item write and after its last one.
type endDB struct {
	DynamoDBClient
	source, leases string

	mu     sync.Mutex
	before []string // lease-table operations before the first source-table write
	after  []string // lease-table operations since the last source-table write
	wrote  bool
}

func newEndDB(db ddbfault.Next, source, leases string) *endDB {
	fc := ddbfault.New(db)
	d := &endDB{DynamoDBClient: workerClient(fc), source: source, leases: leases}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		d.note(call.Tables[0], call.Op)
		return send(ctx, call.In)
	}, ddbfault.OpGetItem, ddbfault.OpQuery, ddbfault.OpUpdateItem, ddbfault.OpPutItem)
	return d
}

func (d *endDB) note(table, op string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case table == d.source:
		d.after, d.wrote = nil, true
	case table == d.leases && !d.wrote:
		d.before = append(d.before, op)
	case table == d.leases:
		d.after = append(d.after, op)
	}
}

// TestOneSlotEndsInThreeRoundTrips: before its first item, a once-worker of a new one-slot group
// sends three requests to the lease table: the group read at start, the take, and the meta item it
// then creates, which stands for the read of the plan after the take (the old code sent five: a
// GetItem of the meta item at start, a Query in the first round, the take, the meta item and a
// GetItem of the plan). After its last item, it marks its slot finished, saves the pass's
// checkpoint and releases the lease in one write, steals nothing (there is no other slot), and
// confirms the group finished with one Query of the group and its meta item plus the confirming
// read: three round trips where it took seven (checkpoint, finished, a group read for stealing,
// release, meta, group, meta). The slot item still ends finished, released, with the pass's
// counts.
func TestOneSlotEndsInThreeRoundTrips(t *testing.T) {
	const items = 7
	f := newFixture(t, items)
	db := newEndDB(f.db, f.table, f.leaseTable)
	c := fastTimings(f.config(LedgerInline))
	c.Client, c.Workers, c.Once, c.CompleteOnly = db, 1, true, true
	c.StandbyPoll = 2 * time.Second // the start's read of the group stays fresh for the first round
	// No heartbeat or periodic checkpoint falls inside the run (a slow machine once counted a
	// heartbeat after the last item write): the requests counted are the start's and the end's.
	c.LeaseTTL, c.Heartbeat, c.CheckpointInterval = 30*time.Second, 10*time.Second, 10*time.Second
	var events []LeaseEventKind
	c.Hooks.OnLease = func(e LeaseEvent) { events = append(events, e.Kind) }
	w, err := New(c)
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, 30*time.Second))
	require.Equal(t, int64(items), w.Stats().Completed)

	require.Equal(t, []string{"Query", "PutItem", "PutItem"}, db.before,
		"lease-table requests before the first item write: the group read at start (the first round's view), the take, the new group's meta item (the read after the take)")
	require.Equal(t, []string{"UpdateItem", "Query", "GetItem"}, db.after,
		"lease-table requests after the last item write: finish+checkpoint+release, the group read, the confirming meta read")
	require.Equal(t, []LeaseEventKind{LeaseAcquired, LeaseFinished, LeaseReleased}, events)

	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	st, err := locks.GroupStatus(context.Background(), w.Config().Group)
	require.NoError(t, err)
	require.Len(t, st.Slots, 1)
	s := st.Slots[0]
	require.True(t, s.Finished, "slot 0 finished")
	require.True(t, s.Released, "slot 0 released")
	p, err := ParseSlotProgress(s.Checkpoint)
	require.NoError(t, err)
	require.Equal(t, int64(items), p.Done, "the finishing write saved the pass's counts")
	require.Equal(t, int64(items), p.Scanned)
	done, total := p.SegmentsDone()
	require.Equal(t, total, done, fmt.Sprintf("the saved position is the pass's end: %d of %d segments done", done, total))
}

// loseFinishAnswer is a worker's client over db that applies the first write that finishes and
// releases a slot but reports it failed (its answer lost), as a timeout would.
func loseFinishAnswer(db ddbfault.Next) DynamoDBClient {
	fc := ddbfault.New(db)
	var once sync.Once
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		out, err := send(ctx, in)
		lost := false
		if err == nil && strings.Contains(aws.ToString(in.UpdateExpression), "#fin = :true") &&
			strings.Contains(aws.ToString(in.UpdateExpression), "#rel = :true") {
			once.Do(func() { lost = true })
		}
		if lost {
			return nil, errInjected
		}
		return out, err
	}, ddbfault.OpUpdateItem)
	return workerClient(fc)
}

// TestLostFinishAnswerStillFinishes: the one write that finishes a one-slot group's slot lands but
// its answer is lost; the worker sends it once more and ends as if the first answer had come: no
// error, the slot finished and released, LeaseFinished before LeaseReleased.
func TestLostFinishAnswerStillFinishes(t *testing.T) {
	f := newFixture(t, 5)
	c := fastTimings(f.config(LedgerInline))
	c.Client, c.Workers, c.Once = loseFinishAnswer(f.db), 1, true
	var events []LeaseEventKind
	c.Hooks.OnLease = func(e LeaseEvent) { events = append(events, e.Kind) }
	w, err := New(c)
	require.NoError(t, err)
	require.NoError(t, runOnceWithin(t, w, func(context.Context, Item) error { return nil }, 30*time.Second))
	require.Equal(t, int64(5), w.Stats().Completed)
	require.Equal(t, []LeaseEventKind{LeaseAcquired, LeaseFinished, LeaseReleased}, events)
	fin, err := w.JobFinished(context.Background())
	require.NoError(t, err)
	require.True(t, fin)
}
