package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// Ceiling is what DynamoDB Local itself does on this machine, without dynapart: the limit every
// other figure is a fraction of.
type Ceiling struct {
	Concurrency   int    // UpdateItem requests in flight
	TxConcurrency int    // TransactWriteItems requests in flight
	TxSize        int    // conditional updates per transaction
	UpdatesPerSec Sample // conditional UpdateItem/s
	TxItemsPerSec Sample // items/s as TransactWriteItems
	TxWCUPerItem  Sample // the WCU DynamoDB Local reported for the transactions, per item
}

// MeasureCeiling writes one conditional UpdateItem per item of a seeded table of n items from
// conc goroutines (keys known in advance: no scan), then the same updates as TransactWriteItems
// of 25, 8 in flight; reps times, on a fresh table each time.
func (e *Env) MeasureCeiling(ctx context.Context, n, conc, reps int) (*Ceiling, error) {
	c := &Ceiling{Concurrency: conc, TxConcurrency: 8, TxSize: 25}
	for rep := range reps {
		table, err := e.freshTable(ctx, "ceiling", n)
		if err != nil {
			return nil, err
		}
		upd, err := e.updateAll(ctx, table, n, conc, "a")
		if err == nil {
			c.UpdatesPerSec = append(c.UpdatesPerSec, upd)
			var tx, wcu float64
			tx, wcu, err = e.transactAll(ctx, table, n, c.TxConcurrency, c.TxSize, "b")
			c.TxItemsPerSec = append(c.TxItemsPerSec, tx)
			c.TxWCUPerItem = append(c.TxWCUPerItem, wcu)
		}
		e.dropTable(table)
		if err != nil {
			return nil, err
		}
		e.logf("ceiling rep %d/%d: %.0f UpdateItem/s, %.0f transacted items/s", rep+1, reps, upd, c.TxItemsPerSec[len(c.TxItemsPerSec)-1])
	}
	return c, nil
}

func condUpdate(table string, key map[string]types.AttributeValue, attr string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key,
		UpdateExpression:          aws.String("SET #s = :done"),
		ConditionExpression:       aws.String("attribute_exists(id) AND (attribute_not_exists(#s) OR #s <> :done)"),
		ExpressionAttributeNames:  map[string]string{"#s": attr + "_status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":done": &types.AttributeValueMemberS{Value: "done"}},
	}
}

// handWrite is the write a team writes by hand without dynapart: mark the item done, once.
func handWrite(table string, key map[string]types.AttributeValue, now time.Time) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key,
		UpdateExpression:          aws.String("SET done_at = :t"),
		ConditionExpression:       aws.String("attribute_not_exists(done_at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)}},
	}
}

// inChunks runs fn over [0, n) in chunks of size from conc goroutines, each taking the next chunk
// as it finishes one; it returns the items per second and the first error (which stops the
// goroutine that met it).
func inChunks(n, conc, size int, fn func(lo, hi int) error) (float64, error) {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := int(next.Add(int64(size)) - int64(size)); lo < n; lo = int(next.Add(int64(size)) - int64(size)) {
				if err := fn(lo, min(lo+size, n)); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), firstErr
}

func (e *Env) updateAll(ctx context.Context, table string, n, conc int, attr string) (float64, error) {
	return inChunks(n, conc, 1, func(i, _ int) error {
		_, err := e.DB.UpdateItem(ctx, condUpdate(table, keyOf(i), attr))
		return err
	})
}

func (e *Env) transactAll(ctx context.Context, table string, n, conc, size int, attr string) (rate, wcuPerItem float64, err error) {
	var mu sync.Mutex
	var wcu float64
	rate, err = inChunks(n, conc, size, func(lo, hi int) error {
		var items []types.TransactWriteItem
		for i := lo; i < hi; i++ {
			u := condUpdate(table, keyOf(i), attr)
			items = append(items, types.TransactWriteItem{Update: &types.Update{
				TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
				ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
				ExpressionAttributeValues: u.ExpressionAttributeValues,
			}})
		}
		out, err := e.DB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			return err
		}
		mu.Lock()
		for _, c := range out.ConsumedCapacity {
			wcu += aws.ToFloat64(c.CapacityUnits)
		}
		mu.Unlock()
		return nil
	})
	return rate, wcu / float64(n), err
}

// Variant names of the throughput matrix.
const (
	VariantPlain        = "plain SDK loop"
	VariantCompleteOnly = "Run, complete-only"
	VariantClaim        = "Run, claim+complete"
	VariantBatched      = "Run, batched claims"
	VariantCLIComplete  = "CLI process, complete-only"
	VariantCLIClaim     = "CLI process, claim+complete"
)

// Variants in the order they are run and shown.
var Variants = []string{VariantPlain, VariantCompleteOnly, VariantClaim, VariantBatched, VariantCLIComplete, VariantCLIClaim}

// libVariants are the variants measured at a real endpoint's latency (the latency scenario).
var libVariants = []string{VariantPlain, VariantCompleteOnly, VariantClaim, VariantBatched}

// ThroughputPoint is one variant at one concurrency.
type ThroughputPoint struct {
	Variant     string
	Concurrency int
	Items       int
	ItemsPerSec Sample
	WCUPerItem  Sample // as DynamoDB reported it (Run variants only)
}

// Throughput is the matrix of Run versus the plain SDK loop.
type Throughput struct {
	Points []*ThroughputPoint
}

// Point returns the point of variant at conc, or nil.
func (t *Throughput) Point(variant string, conc int) *ThroughputPoint {
	for _, p := range t.Points {
		if p.Variant == variant && p.Concurrency == conc {
			return p
		}
	}
	return nil
}

// ItemsAt is the table size used at a concurrency: smaller at low concurrency, where a pass is
// slow, so that the matrix fits in minutes (ratios are taken between equal sizes only).
func ItemsAt(items, conc int) int {
	switch {
	case conc <= 1:
		return max(items/8, 100)
	case conc <= 4:
		return max(items/4, 100)
	case conc <= 16:
		return max(items/2, 100)
	}
	return items
}

// MeasureThroughput runs every variant at every concurrency, reps times, each on a fresh table,
// interleaved: rep 1 of everything, then rep 2, ...
func (e *Env) MeasureThroughput(ctx context.Context, items int, concs []int, reps int) (*Throughput, error) {
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	t := &Throughput{}
	for _, c := range concs {
		for _, v := range Variants {
			if e.Bin == "" && (v == VariantCLIComplete || v == VariantCLIClaim) {
				continue // no binary (the package's own test): library variants only
			}
			t.Points = append(t.Points, &ThroughputPoint{Variant: v, Concurrency: c, Items: ItemsAt(items, c)})
		}
	}
	for rep := range reps {
		for _, p := range t.Points {
			rate, wcu, err := e.throughputOnce(ctx, leases, p.Variant, p.Items, p.Concurrency)
			if err != nil {
				return nil, fmt.Errorf("%s at concurrency %d: %w", p.Variant, p.Concurrency, err)
			}
			p.ItemsPerSec = append(p.ItemsPerSec, rate)
			if wcu > 0 {
				p.WCUPerItem = append(p.WCUPerItem, wcu)
			}
			e.logf("throughput rep %d/%d: %-20s concurrency %2d: %6.0f items/s", rep+1, reps, p.Variant, p.Concurrency, rate)
		}
	}
	return t, nil
}

func (e *Env) throughputOnce(ctx context.Context, leases, variant string, n, conc int) (rate, wcuPerItem float64, err error) {
	table, err := e.freshTable(ctx, "tp", n)
	if err != nil {
		return 0, 0, err
	}
	defer e.dropTable(table)
	return e.runVariant(ctx, table, leases, variant, n, conc)
}

// runVariant processes the n items of table with variant at conc and times it.
func (e *Env) runVariant(ctx context.Context, table, leases, variant string, n, conc int) (rate, wcuPerItem float64, err error) {
	return e.runPass(ctx, pass{db: e.DB, table: table, leases: leases, variant: variant, items: n, conc: conc})
}

// pass is one variant's run over a table.
type pass struct {
	db                     worker.DynamoDBClient // what the library variants and hand loops send their requests through
	table, leases, variant string
	items, conc            int
}

// runPass processes the items of p.table with p.variant at p.conc and times it. The library
// variants and the hand loops send their requests through p.db; the CLI processes, to e.Endpoint.
func (e *Env) runPass(ctx context.Context, p pass) (rate, wcuPerItem float64, err error) {
	start := time.Now()
	var done int64
	switch p.variant {
	case VariantPlain:
		done, err = plainLoop(ctx, p.db, p.table, p.conc)
	case VariantMigrationLoop:
		done, err = migrationLoop(ctx, p.db, p.table, p.conc)
	case VariantCLIComplete, VariantCLIClaim:
		done, err = e.cliOnce(p.table, p.leases, p.conc, p.variant == VariantCLIComplete)
	default:
		cfg := worker.Config{Client: p.db, Table: p.table, LeaseTable: p.leases, Workers: 1, Once: true,
			Concurrency: p.conc, Logger: quietLogger}
		handler := func(context.Context, worker.Item) error { return nil }
		switch p.variant {
		case VariantCompleteOnly:
			cfg.CompleteOnly = true
		case VariantBatched:
			cfg.BatchClaims = true
		case VariantTransform, VariantTransform4:
			// The handler reads the name alone, and says so (as the loop's scan projects id and name).
			cfg.CompleteOnly, cfg.Projection, handler = true, []string{"name"}, worker.WithEffects(transformEffects)
			if p.variant == VariantTransform4 {
				cfg.Segments = transformSegments
			}
		}
		var w *worker.Worker
		w, err = worker.New(cfg)
		if err == nil {
			err = w.Run(ctx, handler)
			st := w.Stats()
			done, wcuPerItem = st.Completed, st.WCU/float64(max(st.Completed, 1))
		}
	}
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if done != int64(p.items) {
		return 0, 0, fmt.Errorf("completed %d of %d items", done, p.items)
	}
	return float64(p.items) / elapsed.Seconds(), wcuPerItem, nil
}

// plainClient is what the plain loop calls.
type plainClient interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// plainLoop is the baseline a team would write by hand without dynapart: a parallel scan of 4
// segments feeding conc goroutines that each mark an item done with one conditional UpdateItem,
// `SET done_at = :t` if `attribute_not_exists(done_at)` (handWrite). It is what a team writes, not
// a copy of Run's write: the ratio includes whatever Run writes beyond it.
func plainLoop(ctx context.Context, db plainClient, table string, conc int) (int64, error) {
	now := time.Now()
	return handLoop(ctx, db, dynamodb.ScanInput{TableName: aws.String(table), ProjectionExpression: aws.String("id")}, conc,
		func(ctx context.Context, k map[string]types.AttributeValue) (bool, error) {
			_, err := db.UpdateItem(ctx, handWrite(table, k, now))
			return err == nil, err
		})
}

// handLoop is how the hand-written loops go over a table: a parallel scan of 4 segments (scan,
// with each page's segment and start key set) feeding conc goroutines that call write for each
// item scanned. write reports whether it wrote the item (counted); its error stops the loop, which
// returns the first.
func handLoop(ctx context.Context, db plainClient, scan dynamodb.ScanInput, conc int,
	write func(ctx context.Context, item map[string]types.AttributeValue) (bool, error)) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	keys := make(chan map[string]types.AttributeValue, conc*2)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				wrote, err := write(ctx, k)
				if err != nil {
					cancel(err)
					continue
				}
				if wrote {
					done.Add(1)
				}
			}
		}()
	}
	const segs = 4
	var sg sync.WaitGroup
	for seg := range segs {
		sg.Add(1)
		go func() {
			defer sg.Done()
			page := scan
			page.Segment, page.TotalSegments = aws.Int32(int32(seg)), aws.Int32(segs)
			for {
				in := page // a request of its own, as the SDK's callers send
				out, err := db.Scan(ctx, &in)
				if err != nil {
					cancel(err)
					return
				}
				for _, it := range out.Items {
					select {
					case keys <- it:
					case <-ctx.Done():
						return
					}
				}
				if out.LastEvaluatedKey == nil {
					return
				}
				page.ExclusiveStartKey = out.LastEvaluatedKey
			}
		}()
	}
	sg.Wait()
	close(keys)
	wg.Wait()
	return done.Load(), context.Cause(ctx)
}

// cliOnce runs `dynapart work --once --workers 1` over table as a process, start to exit, and
// returns the items it completed (its last --progress json line).
func (e *Env) cliOnce(table, leases string, conc int, completeOnly bool) (int64, error) {
	args := []string{"--table", table, "--lease-table", leases, "--workers", "1", "--once",
		"--concurrency", strconv.Itoa(conc), "--progress", "json", "--log-level", "warn"}
	if completeOnly {
		args = append(args, "--complete-only")
	}
	p, err := e.startWork(args...)
	if err != nil {
		return 0, err
	}
	if err := p.waitExit(30 * time.Minute); err != nil {
		return 0, err
	}
	return p.last().Completed, nil
}

// Modes compares the segment and the filter mode: N workers in one process read and complete a
// table together.
type Modes struct {
	Workers     int
	Items       int
	SegmentRCU  Sample
	FilterRCU   Sample
	SegmentRate Sample // items/s of the whole fleet
	FilterRate  Sample
}

// MeasureModes runs n workers (complete-only, concurrency 16 each) over a fresh table of items,
// in segment then filter mode, reps times, and sums the RCU the scans consumed.
func (e *Env) MeasureModes(ctx context.Context, items, n, reps int) (*Modes, error) {
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return nil, err
	}
	defer e.dropTable(leases)
	m := &Modes{Workers: n, Items: items}
	for rep := range reps {
		for _, mode := range []scan.Mode{scan.ModeSegment, scan.ModeFilter} {
			rcu, rate, err := e.modesOnce(ctx, leases, mode, items, n)
			if err != nil {
				return nil, fmt.Errorf("%s mode: %w", mode, err)
			}
			if mode == scan.ModeSegment {
				m.SegmentRCU, m.SegmentRate = append(m.SegmentRCU, rcu), append(m.SegmentRate, rate)
			} else {
				m.FilterRCU, m.FilterRate = append(m.FilterRCU, rcu), append(m.FilterRate, rate)
			}
			e.logf("modes rep %d/%d: %-7s %d workers: %.0f RCU, %.0f items/s", rep+1, reps, mode, n, rcu, rate)
		}
	}
	return m, nil
}

func (e *Env) modesOnce(ctx context.Context, leases string, mode scan.Mode, items, n int) (rcu, rate float64, err error) {
	table, err := e.freshTable(ctx, "modes", items)
	if err != nil {
		return 0, 0, err
	}
	defer e.dropTable(table)
	ws := make([]*worker.Worker, n)
	for i := range ws {
		ws[i], err = worker.New(worker.Config{Client: e.DB, Table: table, LeaseTable: leases, Workers: n, Mode: mode,
			Once: true, CompleteOnly: true, Concurrency: 16, Logger: quietLogger, Owner: fmt.Sprintf("w%d", i),
			PollInterval: 250 * time.Millisecond, StandbyPoll: 100 * time.Millisecond})
		if err != nil {
			return 0, 0, err
		}
	}
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Run(ctx, func(context.Context, worker.Item) error { return nil })
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var done int64
	for i, w := range ws {
		if errs[i] != nil {
			return 0, 0, errs[i]
		}
		st := w.Stats()
		done += st.Completed
		rcu += st.RCU
	}
	if done != int64(items) {
		return 0, 0, fmt.Errorf("completed %d of %d items", done, items)
	}
	return rcu, float64(items) / elapsed.Seconds(), nil
}
