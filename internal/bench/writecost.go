package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// WriteCost is where the time goes at concurrency 1, measured in the run itself. Writes: what one
// write costs DynamoDB Local, sent one at a time and interleaved item by item on one table: the
// hand loop's write against Run's own writes (captured from a Run, so they are what Run sends),
// and a what-if claim that keeps owner, slot, token and scope in one attribute. Timelines: Run
// (complete-only) and the hand loop at concurrency 1, each split into its start (to the first item
// write), its item writes, the client's own work between two writes, and its end.
type WriteCost struct {
	Items         int // per kind of write, per repetition
	TimelineItems int // table size of the timelines

	// Mean latency of one write, µs, one value per repetition.
	Hand, CompleteOnly, Claim, Completion Sample

	Run, Loop Timeline
}

// Timeline splits one pass at concurrency 1; one value per repetition. Writes are one at a time,
// so Elapsed = Start + Writes + Gaps + End in each repetition.
type Timeline struct {
	Start       Sample // ms from the start to the first item write
	Write       Sample // µs, mean item write latency
	Gap         Sample // µs, mean time from one item write's answer to the next write
	End         Sample // ms from the last item write's answer to the return
	ItemsPerSec Sample

	Elapsed, Writes, Gaps Sample // ms in all: the pass, its item writes, the time between them
}

// MeasureWriteCost captures Run's writes, then measures them and the timelines reps times.
func (e *Env) MeasureWriteCost(ctx context.Context, items, timelineItems, reps int) (*WriteCost, error) {
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	ws, err := e.captureRunWrites(ctx, leases)
	if err != nil {
		return nil, err
	}
	if items < 1 || timelineItems < 2 {
		return nil, fmt.Errorf("write cost: want at least 1 item per write and 2 per timeline, got %d and %d", items, timelineItems)
	}
	wc := &WriteCost{Items: items, TimelineItems: timelineItems}
	for rep := range reps {
		if err := e.writeCostOnce(ctx, ws, wc); err != nil {
			return nil, err
		}
		order := []string{VariantPlain, VariantCompleteOnly}
		if rep%2 == 1 {
			order[0], order[1] = order[1], order[0] // neither always goes first
		}
		for _, variant := range order {
			if err := e.timelineOnce(ctx, leases, variant, wc); err != nil {
				return nil, fmt.Errorf("%s timeline: %w", variant, err)
			}
		}
		e.logf("write cost rep %d/%d: hand %.0f µs, complete-only %.0f µs, claim %.0f + completion %.0f µs; gap hand loop %.0f µs, Run %.0f µs",
			rep+1, reps, wc.Hand[rep], wc.CompleteOnly[rep], wc.Claim[rep], wc.Completion[rep], wc.Loop.Gap[rep], wc.Run.Gap[rep])
	}
	return wc, nil
}

// runWrites are Run's item writes, as captured.
type runWrites struct {
	completeOnly, claim, completion *dynamodb.UpdateItemInput
}

// capturingDB records the UpdateItems sent to one table.
type capturingDB struct {
	worker.DynamoDBClient
	table string
	mu    sync.Mutex
	got   []*dynamodb.UpdateItemInput
}

func (c *capturingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if aws.ToString(in.TableName) == c.table {
		c.mu.Lock()
		c.got = append(c.got, in)
		c.mu.Unlock()
	}
	return c.DynamoDBClient.UpdateItem(ctx, in, o...)
}

// captureRunWrites runs Run complete-only, then claim+complete, each over a fresh one-item table,
// and keeps the item writes it sent.
func (e *Env) captureRunWrites(ctx context.Context, leases string) (runWrites, error) {
	var ws runWrites
	for _, completeOnly := range []bool{true, false} {
		got, err := e.captureOne(ctx, leases, completeOnly)
		if err != nil {
			return ws, err
		}
		switch {
		case completeOnly && len(got) == 1:
			ws.completeOnly = got[0]
		case !completeOnly && len(got) == 2:
			ws.claim, ws.completion = got[0], got[1]
		default:
			return ws, fmt.Errorf("capture Run's writes (complete-only %v): %d item writes for 1 item", completeOnly, len(got))
		}
	}
	return ws, nil
}

func (e *Env) captureOne(ctx context.Context, leases string, completeOnly bool) ([]*dynamodb.UpdateItemInput, error) {
	table, err := e.freshTable(ctx, "wcap", 1)
	if err != nil {
		return nil, err
	}
	defer e.dropTable(table)
	db := &capturingDB{DynamoDBClient: e.DB, table: table}
	w, err := worker.New(worker.Config{Client: db, Table: table, LeaseTable: leases, Group: tableName("g"), Workers: 1, Once: true,
		Concurrency: 1, CompleteOnly: completeOnly, Logger: quietLogger})
	if err != nil {
		return nil, err
	}
	if err := w.Run(ctx, func(context.Context, worker.Item) error { return nil }); err != nil {
		return nil, err
	}
	return db.got, nil
}

// replay is a captured write sent to another item of another table; the nth write of its kind asks
// for the consumed capacity as Run does, on 1 write in 16.
func replay(in *dynamodb.UpdateItemInput, table string, key map[string]types.AttributeValue, nth int) *dynamodb.UpdateItemInput {
	out := *in
	out.TableName, out.Key, out.ReturnConsumedCapacity = aws.String(table), key, ""
	if nth%capacityEvery == 0 {
		out.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	}
	return &out
}

// capacityEvery is how often Run asks a write for its consumed capacity (without a write rate).
const capacityEvery = 16

// writeCostOnce sends, on a fresh table, item by item in turn: the hand loop's write, Run's
// complete-only write, and Run's claim and completion; one at a time.
func (e *Env) writeCostOnce(ctx context.Context, ws runWrites, wc *WriteCost) error {
	const kinds = 3
	table, err := e.freshTable(ctx, "wcost", kinds*wc.Items)
	if err != nil {
		return err
	}
	defer e.dropTable(table)
	var sum [4]time.Duration
	now := time.Now()
	for i := range kinds * wc.Items {
		k, nth := keyOf(i), i/kinds
		var seq []*dynamodb.UpdateItemInput
		switch i % kinds {
		case 0:
			seq = []*dynamodb.UpdateItemInput{handWrite(table, k, now)}
		case 1:
			seq = []*dynamodb.UpdateItemInput{replay(ws.completeOnly, table, k, nth)}
		case 2:
			seq = []*dynamodb.UpdateItemInput{replay(ws.claim, table, k, nth), replay(ws.completion, table, k, nth)}
		}
		slot := []int{0, 1, 2}[i%kinds]
		for j, in := range seq {
			start := time.Now()
			if _, err := e.DB.UpdateItem(ctx, in); err != nil {
				return fmt.Errorf("write kind %d of item %d: %w", i%kinds, i, err)
			}
			sum[slot+j] += time.Since(start)
		}
	}
	mean := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(wc.Items) }
	wc.Hand = append(wc.Hand, mean(sum[0]))
	wc.CompleteOnly = append(wc.CompleteOnly, mean(sum[1]))
	wc.Claim, wc.Completion = append(wc.Claim, mean(sum[2])), append(wc.Completion, mean(sum[3]))
	return nil
}

// timedDB times the UpdateItems sent to one table, which must come one at a time (concurrency 1).
type timedDB struct {
	worker.DynamoDBClient
	table string

	mu          sync.Mutex
	first, last time.Time // first write's start, last write's answer
	n, inFlight int
	overlapped  bool // a write started while another was in flight
	busy, gaps  time.Duration
}

func (t *timedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if aws.ToString(in.TableName) != t.table {
		return t.DynamoDBClient.UpdateItem(ctx, in, o...)
	}
	t.mu.Lock()
	start := time.Now()
	if t.n == 0 {
		t.first = start
	} else {
		t.gaps += start.Sub(t.last)
	}
	t.inFlight++
	t.overlapped = t.overlapped || t.inFlight > 1
	t.mu.Unlock()
	out, err := t.DynamoDBClient.UpdateItem(ctx, in, o...)
	t.mu.Lock()
	defer t.mu.Unlock()
	end := time.Now()
	t.inFlight--
	t.n++
	t.busy += end.Sub(start)
	t.last = end
	return out, err
}

// timelineOnce runs variant at concurrency 1 over a fresh table through a timedDB.
func (e *Env) timelineOnce(ctx context.Context, leases, variant string, wc *WriteCost) error {
	n := wc.TimelineItems
	table, err := e.freshTable(ctx, "wtl", n)
	if err != nil {
		return err
	}
	defer e.dropTable(table)
	db := &timedDB{DynamoDBClient: e.DB, table: table}
	start := time.Now()
	var done int64
	if variant == VariantPlain {
		done, err = plainLoop(ctx, db, table, 1)
	} else {
		var w *worker.Worker
		w, err = worker.New(worker.Config{Client: db, Table: table, LeaseTable: leases, Workers: 1, Once: true,
			Concurrency: 1, CompleteOnly: true, Logger: quietLogger})
		if err == nil {
			err = w.Run(ctx, func(context.Context, worker.Item) error { return nil })
			done = w.Stats().Completed
		}
	}
	end := time.Now()
	switch {
	case err != nil:
		return err
	case done != int64(n) || db.n != n:
		return fmt.Errorf("completed %d of %d items in %d writes (want one write per item)", done, n, db.n)
	case db.overlapped:
		return fmt.Errorf("item writes overlapped: the timeline needs them one at a time")
	}
	tl := &wc.Loop
	if variant != VariantPlain {
		tl = &wc.Run
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	tl.Start = append(tl.Start, ms(db.first.Sub(start)))
	tl.Write = append(tl.Write, float64(db.busy.Microseconds())/float64(db.n))
	tl.Gap = append(tl.Gap, float64(db.gaps.Microseconds())/float64(db.n-1))
	tl.End = append(tl.End, ms(end.Sub(db.last)))
	tl.ItemsPerSec = append(tl.ItemsPerSec, float64(n)/end.Sub(start).Seconds())
	tl.Elapsed, tl.Writes, tl.Gaps = append(tl.Elapsed, ms(end.Sub(start))), append(tl.Writes, ms(db.busy)), append(tl.Gaps, ms(db.gaps))
	return nil
}
