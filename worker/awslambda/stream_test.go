package awslambda

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/clock"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// streamFixture is a source table, a lease table and what the stream handler handled.
type streamFixture struct {
	db      *dynamodb.Client
	table   string
	leases  string
	mu      sync.Mutex
	handled map[string][]string // id -> the values of n handled, in order
	fail    map[string]error    // id -> the handler's error for it
	seq     int
	maxWCU  float64      // Config.MaxWCU of every invocation
	reads   atomic.Int64 // GetItem calls on the lease table
	writes  atomic.Int64 // PutItem and UpdateItem calls on the lease table
}

// leaseReads counts the GetItem calls on the lease table.
type leaseReads struct {
	*dynamodb.Client
	f *streamFixture
}

func (c leaseReads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if aws.ToString(in.TableName) == c.f.leases {
		c.f.reads.Add(1)
	}
	return c.Client.GetItem(ctx, in, o...)
}

func (c leaseReads) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if aws.ToString(in.TableName) == c.f.leases {
		c.f.writes.Add(1)
	}
	return c.Client.PutItem(ctx, in, o...)
}

func (c leaseReads) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if aws.ToString(in.TableName) == c.f.leases {
		c.f.writes.Add(1)
	}
	return c.Client.UpdateItem(ctx, in, o...)
}

func newStreamFixture(t *testing.T) *streamFixture {
	db := ddbtest.Client(t)
	f := &streamFixture{db: db, table: ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"}),
		leases: ddbtest.TableName(t, "lease"), handled: map[string][]string{}, fail: map[string]error{}}
	require.NoError(t, lock.CreateTable(context.Background(), db, f.leases))
	ddbtest.DeleteOnCleanup(t, db, f.leases)
	return f
}

func (f *streamFixture) handler(_ context.Context, it worker.Item) error {
	id := it.Key["id"].(*types.AttributeValueMemberS).Value
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[id]; err != nil {
		return err
	}
	f.handled[id] = append(f.handled[id], it.Attrs["n"].(*types.AttributeValueMemberN).Value)
	return nil
}

// put writes item id with n and returns its image as a stream record carries it.
func (f *streamFixture) put(t *testing.T, id string, n int) map[string]events.DynamoDBAttributeValue {
	_, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: id}, "n": &types.AttributeValueMemberN{Value: strconv.Itoa(n)}}})
	require.NoError(t, err)
	return map[string]events.DynamoDBAttributeValue{"id": events.NewStringAttribute(id), "n": events.NewNumberAttribute(strconv.Itoa(n))}
}

// record is a stream record of a write of id from old to new (nil: created; removed: a delete).
func (f *streamFixture) record(id string, old, new map[string]events.DynamoDBAttributeValue, removed bool) events.DynamoDBEventRecord {
	f.seq++
	name := "MODIFY"
	switch {
	case removed:
		name = "REMOVE"
	case old == nil:
		name = "INSERT"
	}
	return events.DynamoDBEventRecord{EventName: name, Change: events.DynamoDBStreamRecord{
		Keys: map[string]events.DynamoDBAttributeValue{"id": events.NewStringAttribute(id)}, OldImage: old, NewImage: new,
		SequenceNumber: fmt.Sprintf("%021d", f.seq), StreamViewType: "NEW_AND_OLD_IMAGES"}}
}

func (f *streamFixture) invoke(t *testing.T, recs ...events.DynamoDBEventRecord) events.DynamoDBEventResponse {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	cfg := worker.Config{Client: leaseReads{f.db, f}, Table: f.table, LeaseTable: f.leases, Group: f.table + "/stream", Workers: 2,
		RetryBackoff: time.Minute, MaxRetryBackoff: time.Hour, MaxWCU: f.maxWCU, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	resp, err := StreamHandler(cfg, f.handler)(ctx, events.DynamoDBEvent{Records: recs})
	require.NoError(t, err)
	return resp
}

func (f *streamFixture) runs(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.handled[id]...)
}

// TestStreamHandler: the Lambda stream handler handles each changed item's version once across
// redeliveries of the same batch; writes that change no content, deletes and items gone are not
// handled; a new version of a handled item is handled; a handler that fails leaves its record
// as a batch item failure (Lambda delivers it again), a permanent failure dead-letters the version
// (resolved, not delivered again).
func TestStreamHandler(t *testing.T) {
	f := newStreamFixture(t)
	var batch []events.DynamoDBEventRecord
	imgs := map[string]map[string]events.DynamoDBAttributeValue{}
	for i := range 6 {
		id := fmt.Sprintf("item-%d", i)
		imgs[id] = f.put(t, id, i)
		batch = append(batch, f.record(id, nil, imgs[id], false))
	}
	batch = append(batch, f.record("item-1", imgs["item-1"], imgs["item-1"], false)) // no new content
	batch = append(batch, f.record("gone", nil, map[string]events.DynamoDBAttributeValue{
		"id": events.NewStringAttribute("gone"), "n": events.NewNumberAttribute("1")}, false)) // never written
	batch = append(batch, f.record("item-9", map[string]events.DynamoDBAttributeValue{"id": events.NewStringAttribute("item-9")}, nil, true))

	require.Empty(t, f.invoke(t, batch...).BatchItemFailures)
	for i := range 6 {
		require.Equal(t, []string{strconv.Itoa(i)}, f.runs(fmt.Sprintf("item-%d", i)))
	}
	require.Empty(t, f.runs("gone"))
	require.Empty(t, f.invoke(t, batch...).BatchItemFailures, "the same batch again (a redelivery)")
	for i := range 6 {
		require.Len(t, f.runs(fmt.Sprintf("item-%d", i)), 1, "handled once across redeliveries")
	}

	// New versions: item-2 changes and is handled; item-3's handler fails (a retry, not due before
	// the deadline: its record is a batch item failure); item-4 fails permanently (dead-lettered at
	// its version: resolved).
	n2, n3, n4 := f.put(t, "item-2", 20), f.put(t, "item-3", 30), f.put(t, "item-4", 40)
	f.mu.Lock()
	f.fail["item-3"], f.fail["item-4"] = errors.New("try later"), worker.Permanent(errors.New("bad item"))
	f.mu.Unlock()
	recs := []events.DynamoDBEventRecord{f.record("item-2", imgs["item-2"], n2, false),
		f.record("item-3", imgs["item-3"], n3, false), f.record("item-4", imgs["item-4"], n4, false)}
	resp := f.invoke(t, recs...)
	require.Equal(t, []events.DynamoDBBatchItemFailure{{ItemIdentifier: recs[1].Change.SequenceNumber}}, resp.BatchItemFailures)
	require.Equal(t, []string{"2", "20"}, f.runs("item-2"))
	require.Empty(t, f.invoke(t, recs[2]).BatchItemFailures, "a dead-lettered version is not handled again")
}

// TestStreamHandlerStaleImageGetsContentAsClaimed: a record's image older than a version another
// group of the job handled since (a back-fill beside the stream tail handled n=2, the item then
// changed to n=3 and was reopened for it) must not be handled: the handler gets the item as of
// its claim (n=3). It got the record's n=1, handled after n=2 and recorded as the version done.
func TestStreamHandlerStaleImageGetsContentAsClaimed(t *testing.T) {
	ctx := context.Background()
	f := newStreamFixture(t)
	img := f.put(t, "item-0", 1)
	key := worker.Key{"id": &types.AttributeValueMemberS{Value: "item-0"}}
	setN := func(n int) {
		_, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.table), Key: key,
			UpdateExpression:          aws.String("SET n = :n"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.Itoa(n)}}})
		require.NoError(t, err)
	}
	other, err := ledger.NewInline(f.db, f.table, []string{"id"}, ledger.WithVersions(), ledger.WithMaxClockSkew(5*time.Second))
	require.NoError(t, err)
	setN(2)
	out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	now := time.Now()
	outs, err := other.Claim(ctx, []ledger.ClaimRequest{{Key: key, Owner: "backfill", Now: now, Until: now.Add(time.Minute),
		Version: other.ContentVersion(out.Item)}})
	require.NoError(t, err)
	require.True(t, outs[0].Claimed)
	require.NoError(t, other.Complete(ctx, outs[0].Claim, time.Now()))
	setN(3)
	st, err := other.State(ctx, key)
	require.NoError(t, err)
	reopened, err := other.Renew(ctx, key, st.Claim, time.Now())
	require.NoError(t, err)
	require.NotEmpty(t, reopened)

	require.Empty(t, f.invoke(t, f.record("item-0", nil, img, false)).BatchItemFailures)
	require.Equal(t, []string{"3"}, f.runs("item-0"), "handled as of the claim, never n=1 after n=2")
}

// TestStreamHandlerKeepsTheGroupsBudgetAndPause: the stream handler records Config.MaxWCU on the
// group, adds what each call consumed to the group's budget (a Lambda function may be frozen after
// any call), pauses the group when the budget is reached, and handles nothing while the group is
// paused or at its budget (resumed without a raise): every record is a batch item failure,
// delivered again and handled once the budget is raised and the group resumed.
func TestStreamHandlerKeepsTheGroupsBudgetAndPause(t *testing.T) {
	f := newStreamFixture(t)
	ctx := context.Background()
	group := f.table + "/stream"
	batch := func(ids ...string) []events.DynamoDBEventRecord {
		var recs []events.DynamoDBEventRecord
		for i, id := range ids {
			recs = append(recs, f.record(id, nil, f.put(t, id, i), false))
		}
		return recs
	}
	require.Empty(t, f.invoke(t, batch("a0")...).BatchItemFailures) // the group exists
	locks, err := lock.New(f.db, f.leases)
	require.NoError(t, err)
	f.maxWCU = 3 // recorded by the next call, as Run records it
	require.Empty(t, f.invoke(t, batch("b0", "b1", "b2")...).BatchItemFailures)
	st, err := locks.GroupState(ctx, group)
	require.NoError(t, err)
	require.Equal(t, 3.0, st.Budget.MaxWCU, "Config.MaxWCU recorded")
	require.GreaterOrEqual(t, st.Budget.UsedWCU, 6.0, "a claim and a completion per item handled: %+v", st.Budget)
	require.True(t, st.Paused, "the budget is reached: %+v", st.Budget)
	require.Equal(t, lock.PausedByBudget, st.PausedReason)

	paused := batch("c0", "c1")
	writes := f.writes.Load()
	require.Len(t, f.invoke(t, paused...).BatchItemFailures, 2, "a paused group handles nothing")
	require.Equal(t, writes, f.writes.Load(), "and takes no slot: no lease-table write")
	_, err = locks.ResumeGroup(ctx, group) // no raise: still at the budget
	require.NoError(t, err)
	writes = f.writes.Load()
	require.Len(t, f.invoke(t, paused...).BatchItemFailures, 2, "a group at its budget handles nothing")
	require.Equal(t, writes+1, f.writes.Load(), "its one lease-table write: the pause")
	st, err = locks.GroupState(ctx, group)
	require.NoError(t, err)
	require.True(t, st.Paused, "paused again at its budget: %+v", st.Budget)
	require.Empty(t, f.runs("c0"))
	require.Empty(t, f.runs("c1"))

	_, err = locks.SetBudget(ctx, group, lock.Limits{WCU: 1000})
	require.NoError(t, err)
	_, err = locks.ResumeGroup(ctx, group)
	require.NoError(t, err)
	require.Empty(t, f.invoke(t, paused...).BatchItemFailures, "delivered again after the raise and resume (the config's MaxWCU 3 does not lower it)")
	require.Equal(t, []string{"0"}, f.runs("c0"))
	require.Equal(t, []string{"1"}, f.runs("c1"))
}

// A call reads the group's meta item once, with its slots when it starts: its pause check uses
// that read, and only a call on a budgeted group reads the meta item again at its end, for its
// usage report.
func TestStreamHandlerReportsUsageOnlyWithABudget(t *testing.T) {
	f := newStreamFixture(t)
	require.Empty(t, f.invoke(t, f.record("a", nil, f.put(t, "a", 0), false)).BatchItemFailures) // the group exists
	readsOf := func(id string) int64 {
		before := f.reads.Load()
		require.Empty(t, f.invoke(t, f.record(id, nil, f.put(t, id, 0), false)).BatchItemFailures)
		return f.reads.Load() - before
	}
	require.Zero(t, readsOf("b"), "no GetItem of the lease table on a group without a budget")
	locks, err := lock.New(f.db, f.leases)
	require.NoError(t, err)
	_, err = locks.SetBudget(context.Background(), f.table+"/stream", lock.Limits{WCU: 1000})
	require.NoError(t, err)
	require.EqualValues(t, 1, readsOf("c"), "the report's read, with a budget only")
	st, err := locks.GroupState(context.Background(), f.table+"/stream")
	require.NoError(t, err)
	require.Positive(t, st.Budget.UsedWCU, "the budgeted call reported its usage")
}

// A budget set while a call runs gets the call's consumption when the call ran a BudgetInterval
// or longer (helper-63: the call found no budget at its start, skipped its end report, and its
// Worker, one per invocation, took the consumption with it).
func TestStreamHandlerReportsALongCallToABudgetSetDuringIt(t *testing.T) {
	f := newStreamFixture(t)
	require.Empty(t, f.invoke(t, f.record("a", nil, f.put(t, "a", 0), false)).BatchItemFailures) // the group exists
	locks, err := lock.New(f.db, f.leases)
	require.NoError(t, err)
	group := f.table + "/stream"
	var recs []events.DynamoDBEventRecord
	for _, id := range []string{"b0", "b1", "b2"} {
		recs = append(recs, f.record(id, nil, f.put(t, id, 1), false))
	}
	clk := clock.NewFake(time.Now())
	var once sync.Once
	h := func(ctx context.Context, it worker.Item) error {
		once.Do(func() {
			_, err := locks.SetBudget(ctx, group, lock.Limits{WCU: 1000})
			require.NoError(t, err)
			clk.Advance(time.Second) // the call's work takes its BudgetInterval
		})
		return f.handler(ctx, it)
	}
	cfg := worker.Config{Client: f.db, Table: f.table, LeaseTable: f.leases, Group: group, Workers: 2, Concurrency: 1,
		BudgetInterval: time.Second, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	resp, err := StreamHandler(cfg, h)(context.Background(), events.DynamoDBEvent{Records: recs})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	st, err := locks.GroupState(context.Background(), group)
	require.NoError(t, err)
	require.GreaterOrEqual(t, st.Budget.UsedWCU, 6.0, "a claim and a completion per item handled: %+v", st.Budget)
}
