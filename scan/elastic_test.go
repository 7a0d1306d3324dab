package scan_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
)

// inflightClient is a client that counts the Scan requests in flight and the most seen at once.
// To make overlap likely, a request waits (up to hold) until want requests are in flight.
type inflightClient struct {
	scan.DynamoDBClient
	want int
	hold time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	now     int
	maxSeen int
	calls   int
}

func newInflightClient(db ddbfault.Next, want int) *inflightClient {
	fc := ddbfault.New(db)
	c := &inflightClient{DynamoDBClient: fc, want: want, hold: 100 * time.Millisecond}
	c.cond = sync.NewCond(&c.mu)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		c.enter()
		defer func() {
			c.mu.Lock()
			c.now--
			c.mu.Unlock()
		}()
		return send(ctx, call.In)
	}, ddbfault.OpScan)
	return c
}

// enter counts a request in flight and waits (up to hold) until want are.
func (c *inflightClient) enter() {
	c.mu.Lock()
	c.now++
	c.calls++
	c.maxSeen = max(c.maxSeen, c.now)
	c.cond.Broadcast()
	timeout := time.AfterFunc(c.hold, func() { // the tail of a scan never reaches want
		c.mu.Lock()
		defer c.mu.Unlock()
		c.cond.Broadcast()
	})
	deadline := time.Now().Add(c.hold)
	for c.now < c.want && time.Now().Before(deadline) {
		c.cond.Wait()
	}
	timeout.Stop()
	c.mu.Unlock()
}

// TestManySegmentsPerSlot: with Total 32 and 2 slots, each slot owns 16 segments and reads all
// of them, every item once across the slots, with at most SubSegments (4) requests in flight.
func TestManySegmentsPerSlot(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	items := makeItems("S", 800, 0)
	seed(t, db, table, items)
	plan := scan.Plan{Mode: scan.ModeSegment, Slots: 2, SubSegments: 4, Total: 32}
	union := map[string]int{}
	for slot := range 2 {
		ic := newInflightClient(db, 4)
		got, sc := readAll(t, scan.Config{Client: ic, Table: table, Plan: plan, Slot: slot, PageLimit: 20})
		for k := range got {
			prev, dup := union[k]
			require.False(t, dup, "item %s in slot %d and slot %d", k, prev, slot)
			union[k] = slot
		}
		st := sc.Stats()
		require.Len(t, st.Segments, 16)
		for i, ss := range st.Segments {
			require.Equal(t, slot*16+i, ss.Segment)
			require.Positive(t, ss.Pages, "segment %d read", ss.Segment)
		}
		ic.mu.Lock()
		t.Logf("slot %d: %d items, %d requests, at most %d in flight", slot, len(got), ic.calls, ic.maxSeen)
		require.LessOrEqual(t, ic.maxSeen, 4, "at most SubSegments requests in flight")
		require.GreaterOrEqual(t, ic.maxSeen, 2, "segments are read in parallel")
		ic.mu.Unlock()
		require.EqualValues(t, ic.calls, st.Pages)
	}
	require.Len(t, union, len(items))
}

// pageLog is a client that records every Scan request's (segment, start key), and the capacity of
// the answered ones (a request cancelled when its consumer stops has no answer, but may still be
// charged).
type pageLog struct {
	scan.DynamoDBClient
	mu       sync.Mutex
	starts   map[string]int
	rcu      float64
	maxPage  float64
	canceled int
}

func newPageLog(db ddbfault.Next) *pageLog {
	fc := ddbfault.New(db)
	l := &pageLog{DynamoDBClient: fc, starts: map[string]int{}}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.ScanInput)
		l.mu.Lock()
		l.starts[fmt.Sprintf("%d/%v", *in.Segment, keyString(in.ExclusiveStartKey))]++
		l.mu.Unlock()
		out, err := send(ctx, in)
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			l.canceled++
			return out, err
		}
		if cc := out.(*dynamodb.ScanOutput).ConsumedCapacity; cc != nil {
			c := aws.ToFloat64(cc.CapacityUnits)
			l.rcu += c
			l.maxPage = max(l.maxPage, c)
		}
		return out, err
	}, ddbfault.OpScan)
	return l
}

func keyString(k item) string {
	if k == nil {
		return "start"
	}
	return keyOf(k)
}

func (l *pageLog) repeats() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.starts {
		n += c - 1
	}
	return n
}

// composePosition builds slot's position under plan from the checkpoints of an earlier plan with
// the same Total: for each segment the slot now owns, the cursor of the one checkpoint that has
// it. Cursors that have not moved are left out, so the position holds a subset of the segments.
func composePosition(t *testing.T, table string, plan scan.Plan, slot int, from []scan.Position) string {
	p := scan.Position{Table: table, Mode: scan.ModeSegment, TotalSegments: plan.TotalSegments()}
	for _, seg := range plan.Segments(slot) {
		var found []scan.Cursor
		for _, old := range from {
			if c, ok := old.Cursor(seg); ok {
				found = append(found, c)
			}
		}
		require.Len(t, found, 1, "segment %d is in exactly one old checkpoint", seg)
		if c := found[0]; c.Done || c.LastEvaluatedKey != nil {
			p.Cursors = append(p.Cursors, c)
		}
	}
	cp, err := scan.EncodeCheckpoint(p)
	require.NoError(t, err)
	return cp
}

// fleet is the slots of one table's scans in TestResumeAcrossResize; seen counts every item they
// delivered.
type fleet struct {
	t     *testing.T
	db    scan.DynamoDBClient
	table string
	seen  map[string]int
}

// run runs every slot of plan, each resumed from a position composed of the previous
// checkpoints, and stops slot k after stopAfter(k) delivered pages (0: reads to the end). Every
// delivered item is acknowledged and counted in seen. It returns the new checkpoints and RCU.
func (f fleet) run(plan scan.Plan, from []scan.Position, stopAfter func(slot int) int) ([]scan.Position, float64) {
	t, db, table, seen := f.t, f.db, f.table, f.seen
	var out []scan.Position
	var rcu float64
	for slot := range plan.Slots {
		cfg := scan.Config{Client: db, Table: table, Plan: plan, Slot: slot, PageLimit: 10, MaxUnackedPages: 1}
		if from != nil {
			cfg.Resume = composePosition(t, table, plan, slot, from)
		}
		sc, err := scan.New(cfg)
		require.NoError(t, err)
		pages, stop := 0, stopAfter(slot)
		err = sc.Run(context.Background(), func(_ context.Context, p *scan.Page) error {
			for _, it := range p.Items {
				seen[keyOf(it.Attrs)]++
				it.Ack()
			}
			if pages++; pages == stop {
				return errStop
			}
			return nil
		})
		if stop == 0 {
			require.NoError(t, err)
			require.True(t, sc.Done())
		} else {
			require.True(t, errors.Is(err, errStop), "slot %d stops after %d pages: %v", slot, stop, err)
		}
		p, err := scan.DecodeCheckpoint(sc.Checkpoint())
		require.NoError(t, err)
		out = append(out, p)
		rcu += sc.Stats().RCU
	}
	return out, rcu
}

// TestResumeAcrossResize: a fleet of 2 slots on 16 segments stops part-way, 4 slots resume from
// positions composed of the 2 slots' cursors and stop again, and 3 slots finish. Every item is
// delivered once in all, the only pages read twice are those read but never delivered (at most
// one per stopped slot with MaxUnackedPages 1), and the RCU stays within 1.1x of one whole scan.
func TestResumeAcrossResize(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	items := makeItems("S", 1000, 600)
	seed(t, db, table, items)
	plan := func(slots int) scan.Plan {
		return scan.Plan{Mode: scan.ModeSegment, Slots: slots, SubSegments: 2, Total: 16}
	}

	whole := map[string]int{}
	_, base := fleet{t, db, table, whole}.run(plan(1), nil, func(int) int { return 0 })
	require.Len(t, whole, len(items))

	log := newPageLog(db)
	seen := map[string]int{}
	resized := fleet{t, log, table, seen}
	pos, rcu2 := resized.run(plan(2), nil, func(slot int) int { return []int{15, 20}[slot] })
	partial := len(seen)
	pos, rcu4 := resized.run(plan(4), pos, func(int) int { return 3 })
	require.Greater(t, len(seen), partial)
	_, rcu3 := resized.run(plan(3), pos, func(int) int { return 0 })

	require.Len(t, seen, len(items))
	for k, c := range seen {
		require.Equal(t, 1, c, "item %s delivered %d times", k, c)
	}
	repeats := log.repeats()
	total := rcu2 + rcu4 + rcu3
	log.mu.Lock()
	defer log.mu.Unlock()
	require.InDelta(t, log.rcu, total, 0.01, "Stats.RCU counts every answered request")
	// A cancelled request is not answered, so charge every repeated page at the largest page's cost.
	bound := total + float64(repeats)*log.maxPage
	t.Logf("one scan %.1f RCU; resized %.1f + %.1f + %.1f = %.1f RCU (%.3fx), %d pages read twice (%d requests cancelled), at most %.1f RCU (%.3fx)",
		base, rcu2, rcu4, rcu3, total, total/base, repeats, log.canceled, bound, bound/base)
	require.LessOrEqual(t, repeats, 2+4, "only the undelivered page of each stopped slot is read again")
	require.LessOrEqual(t, bound, 1.1*base)
}
