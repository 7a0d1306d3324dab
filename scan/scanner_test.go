package scan_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
)

// TestSlotsPartitionTheTable: for N in {1, 3, 8}, in segment and filter mode, and for string,
// number and binary keys, the slots' items are disjoint and together are the table.
func TestSlotsPartitionTheTable(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	for _, kt := range []string{"S", "N", "B"} {
		table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: kt})
		// DynamoDB Local reads the whole table for each segment request, so the table stays small.
		items := makeItems(kt, map[string]int{"S": 1200, "N": 800, "B": 800}[kt], 0)
		seed(t, db, table, items)
		all := keySet(items)
		t.Run(kt, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []scan.Mode{scan.ModeSegment, scan.ModeFilter} {
				for _, slots := range []int{1, 3, 8} {
					t.Run(fmt.Sprintf("%s/N=%d", mode, slots), func(t *testing.T) {
						union := map[string]int{}
						var returned int64
						subSegs := 2 // the same on every slot of a fleet
						if slots == 8 {
							subSegs = 1
						}
						for slot := range slots {
							got, sc := readAll(t, scan.Config{Client: db, Table: table, Slot: slot, PartitionAttr: "grp",
								Plan: scan.Plan{Mode: mode, Slots: slots, SubSegments: subSegs}})
							for k := range got {
								prev, dup := union[k]
								require.False(t, dup, "item %s in slot %d and slot %d", k, prev, slot)
								union[k] = slot
								if mode == scan.ModeFilter {
									require.Equal(t, scan.PartitionOf(all[k], "grp", slots), slot, k)
								}
							}
							st := sc.Stats()
							returned += st.Returned
							require.EqualValues(t, len(got), st.Returned)
							require.Equal(t, []string{"id"}, sc.KeyAttrs())
							if mode == scan.ModeFilter {
								require.EqualValues(t, len(items), st.Scanned, "filter mode reads the whole table")
							}
						}
						require.Len(t, union, len(all))
						require.EqualValues(t, len(all), returned)
						for k := range all {
							require.Contains(t, union, k)
						}
						if mode == scan.ModeFilter {
							for k, it := range all {
								if _, has := it["grp"]; !has {
									require.Equal(t, 0, union[k], "an item without the partition attribute belongs to slot 0")
								}
							}
						}
					})
				}
			}
		})
	}
}

// TestFilterModeDefaultsToPartitionKey: without PartitionAttr, filter mode partitions by the key.
func TestFilterModeDefaultsToPartitionKey(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "N"})
	items := makeItems("N", 600, 0)
	seed(t, db, table, items)
	total := 0
	for slot := range 3 {
		got, _ := readAll(t, scan.Config{Client: db, Table: table, Slot: slot, Plan: scan.Plan{Mode: scan.ModeFilter, Slots: 3}})
		for _, it := range got {
			require.Equal(t, slot, scan.PartitionOf(it, "id", 3))
		}
		total += len(got)
	}
	require.Equal(t, len(items), total)
}

// noDescribe refuses DescribeTable: a scanner given the table's description must not send one.
type noDescribe struct{ scan.DynamoDBClient }

func (noDescribe) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, errors.New("DescribeTable sent although the scanner was given the description")
}

// TestDescriptionSavesDescribeTable: with Config.Description the scanner sends no DescribeTable and
// takes what it needs from the description: filter mode's default PartitionAttr (the key) and the
// index check of index mode.
func TestDescriptionSavesDescribeTable(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	ctx := context.Background()
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "N"})
	items := makeItems("N", 300, 0)
	seed(t, db, table, items)
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	total := 0
	for slot := range 3 {
		got, _ := readAll(t, scan.Config{Client: noDescribe{db}, Table: table, Description: desc.Table, Slot: slot, Plan: scan.Plan{Mode: scan.ModeFilter, Slots: 3}})
		for _, it := range got {
			require.Equal(t, slot, scan.PartitionOf(it, "id", 3))
		}
		total += len(got)
	}
	require.Equal(t, len(items), total)

	cfg := indexConfig(noDescribe{db}, table, 1, 0)
	cfg.Description = desc.Table
	sc, err := scan.New(cfg)
	require.NoError(t, err)
	err = sc.Run(ctx, func(context.Context, *scan.Page) error { return nil })
	var ce *scan.ConfigError
	require.ErrorAs(t, err, &ce, "the description has no index %q", "pending")
	require.Equal(t, "IndexName", ce.Field)
}

// indexTable makes a table with a pending index over 8 shards; every fifth item is not pending.
func indexTable(t testing.TB, db *dynamodb.Client, count int) (table string, pending map[string]item) {
	table = ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	ctx := context.Background()
	require.NoError(t, scan.CreatePendingIndex(ctx, db, table, "pending", "shard"))
	require.NoError(t, scan.CreatePendingIndex(ctx, db, table, "pending", "shard"), "idempotent")
	require.ErrorIs(t, scan.CreatePendingIndex(ctx, db, table, "pending", "other"), scan.ErrIndexConflict)
	items := makeItems("S", count, 0)
	pending = map[string]item{}
	for i, it := range items {
		if i%5 != 0 {
			scan.MarkPending(it, "id", "shard", 8)
			pending[keyOf(it)] = it
		}
	}
	seed(t, db, table, items)
	return table, pending
}

func indexConfig(db scan.DynamoDBClient, table string, slots, slot int) scan.Config {
	return scan.Config{Client: db, Table: table, Slot: slot, Plan: scan.Plan{Mode: scan.ModeIndex, Slots: slots, SubSegments: 2},
		IndexName: "pending", ShardAttr: "shard", Shards: 8}
}

func TestIndexModePartitionsPendingItems(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table, pending := indexTable(t, db, 1000)
	for _, slots := range []int{1, 3, 8} {
		union := map[string]int{}
		for slot := range slots {
			got, sc := readAll(t, indexConfig(db, table, slots, slot))
			for k, it := range got {
				prev, dup := union[k]
				require.False(t, dup, "item %s in slot %d and slot %d", k, prev, slot)
				union[k] = slot
				require.Equal(t, slot, scan.PartitionOf(it, "shard", 8)%slots)
			}
			for _, seg := range sc.Stats().Segments {
				require.Equal(t, slot, seg.Segment%slots, "slot %d queries shard %d", slot, seg.Segment)
			}
		}
		require.Len(t, union, len(pending), "N=%d: exactly the pending items", slots)
		for k := range pending {
			require.Contains(t, union, k)
		}
	}
	cfg := indexConfig(db, table, 1, 0)
	cfg.IndexName = "nope"
	sc, err := scan.New(cfg)
	require.NoError(t, err)
	var ce *scan.ConfigError
	require.ErrorAs(t, sc.Run(context.Background(), func(context.Context, *scan.Page) error { return nil }), &ce)
	require.Equal(t, "IndexName", ce.Field)
}

// TestResumeAfterRandomStops stops scans at random points, with items acknowledged out of order
// and some only after Run returned, resumes from the checkpoint, and checks at every stop that no
// item of the acknowledged prefix is delivered again, and at the end that every item was
// acknowledged behind a checkpoint exactly once: so every unacknowledged item was re-delivered.
func TestResumeAfterRandomStops(t *testing.T) {
	t.Parallel()
	seedV := seedFromEnv(t)
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	items := makeItems("S", 1200, 0)
	seed(t, db, table, items)
	itable, pending := indexTable(t, db, 900)
	all := keySet(items)
	for mi, mode := range []scan.Mode{scan.ModeSegment, scan.ModeFilter, scan.ModeIndex} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := newRand(seedV + uint64(mi))
			for iter := range 10 {
				slots := 3
				slot := r.IntN(slots)
				cfg := scan.Config{Client: db, Table: table, Slot: slot, PartitionAttr: "grp",
					Plan: scan.Plan{Mode: mode, Slots: slots, SubSegments: 1 + r.IntN(3)}, PageLimit: int32(10 + r.IntN(30))}
				share := map[string]bool{}
				if mode == scan.ModeIndex {
					cfg = indexConfig(db, itable, slots, slot)
					cfg.PageLimit = int32(10 + r.IntN(30))
					for k, it := range pending {
						if scan.PartitionOf(it, "shard", 8)%slots == slot {
							share[k] = true
						}
					}
				} else {
					for k, it := range all {
						if mode == scan.ModeSegment || scan.PartitionOf(it, "grp", slots) == slot {
							share[k] = true
						}
					}
				}
				if mode == scan.ModeSegment { // the share is what the slot's segments hold
					got, _ := readAll(t, cfg)
					share = map[string]bool{}
					for k := range got {
						share[k] = true
					}
				}
				cfg.MaxUnackedPages = 2 + r.IntN(4)
				resumeChain(t, r, cfg, share, fmt.Sprintf("iteration %d", iter))
			}
		})
	}
}

var errStop = errors.New("consumer stops")

type seenPage struct {
	seg   int
	items []*scan.Item
	keys  []string
}

func resumeChain(t *testing.T, r *rand.Rand, cfg scan.Config, share map[string]bool, what string) {
	covered := map[string]bool{} // items behind a checkpoint
	cp := ""
	stops := 1 + r.IntN(3)
	for stage := 0; ; stage++ {
		final := stage >= stops
		cfg.Resume = cp
		var callbacks []string
		cfg.OnCheckpoint = func(v string) { callbacks = append(callbacks, v) }
		sc, err := scan.New(cfg)
		require.NoError(t, err, what)
		ctx, cancel := context.WithCancel(context.Background())
		stopAfter := r.IntN(len(share) + 1)
		useCancel := r.IntN(2) == 0
		var pages []*seenPage
		var unacked []*scan.Item
		delivered := 0
		ackSome := func(k int) {
			for ; k > 0 && len(unacked) > 0; k-- {
				i := r.IntN(len(unacked))
				unacked[i].Ack()
				unacked[i] = unacked[len(unacked)-1]
				unacked = unacked[:len(unacked)-1]
			}
		}
		err = sc.Run(ctx, func(ctx context.Context, p *scan.Page) error {
			sp := &seenPage{seg: p.Segment, items: p.Items}
			for _, it := range p.Items {
				k := keyOf(it.Attrs)
				require.False(t, covered[k], "%s stage %d: %s is behind the checkpoint but delivered again", what, stage, k)
				require.True(t, share[k], "%s: %s is not in the slot's share", what, k)
				sp.keys = append(sp.keys, k)
			}
			pages = append(pages, sp)
			unacked = append(unacked, p.Items...)
			delivered += len(p.Items)
			if final {
				ackSome(len(unacked))
				return nil
			}
			ackSome(r.IntN(len(unacked) + 1))
			// Reading waits while MaxUnackedPages pages are unacknowledged: a consumer that
			// holds that many and waits for another page would wait forever.
			for openPages(pages, unacked) >= cfg.MaxUnackedPages {
				ackSome(1)
			}
			if delivered >= stopAfter {
				if useCancel {
					cancel()
					return ctx.Err()
				}
				return errStop
			}
			return nil
		})
		cancel()
		requireStopped(t, err, final, useCancel, what)
		if !final {
			ackSome(r.IntN(len(unacked) + 1)) // late acknowledgements still count
		}
		cp = sc.Checkpoint()
		if len(callbacks) > 0 {
			require.Equal(t, cp, callbacks[len(callbacks)-1], "OnCheckpoint saw the latest position")
		}
		coverAckedPrefix(t, pages, unacked, covered, what)
		if err == nil && len(unacked) == 0 {
			require.True(t, sc.Done(), what)
			require.Len(t, covered, len(share), "%s: every item of the share was acknowledged behind a checkpoint", what)
			cfg.Resume = cp
			requireResumesToNothing(t, cfg)
			return
		}
		require.False(t, final, what)
	}
}

// requireStopped checks how a stage of resumeChain ended: the final stage reads to the end, the
// others stop by cancel (useCancel) or by the consumer's error.
func requireStopped(t *testing.T, err error, final, useCancel bool, what string) {
	t.Helper()
	switch {
	case final:
		require.NoError(t, err, what)
	case err != nil && useCancel:
		require.ErrorIs(t, err, context.Canceled, what)
	case err != nil:
		require.ErrorIs(t, err, errStop, what)
	}
}

// coverAckedPrefix adds to covered the items of each segment's acknowledged prefix of pages (now
// behind the checkpoint), requiring that none was covered before.
func coverAckedPrefix(t *testing.T, pages []*seenPage, unacked []*scan.Item, covered map[string]bool, what string) {
	t.Helper()
	blocked := map[int]bool{}
	for _, p := range pages {
		if blocked[p.seg] {
			continue
		}
		for _, it := range p.items {
			if !acked(it, unacked) {
				blocked[p.seg] = true
				break
			}
		}
		if blocked[p.seg] {
			continue
		}
		for _, k := range p.keys {
			require.False(t, covered[k], "%s: %s covered twice", what, k)
			covered[k] = true
		}
	}
}

// requireResumesToNothing requires that cfg, resumed from a finished position, reads nothing.
func requireResumesToNothing(t *testing.T, cfg scan.Config) {
	t.Helper()
	again, err := scan.New(cfg)
	require.NoError(t, err)
	require.NoError(t, again.Run(context.Background(), func(context.Context, *scan.Page) error {
		return errors.New("a finished position delivered a page")
	}))
	require.True(t, again.Done())
	require.Zero(t, again.Stats().Pages)
}

func openPages(pages []*seenPage, unacked []*scan.Item) int {
	open := map[*seenPage]bool{}
	for _, p := range pages {
		for _, it := range p.items {
			if !acked(it, unacked) {
				open[p] = true
			}
		}
	}
	return len(open)
}

func acked(it *scan.Item, unacked []*scan.Item) bool {
	for _, u := range unacked {
		if u == it {
			return false
		}
	}
	return true
}

// TestBackpressure: with MaxUnackedPages pages delivered and unacknowledged, no further request
// is made.
func TestBackpressure(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(t, db, table, makeItems("S", 600, 0))
	const maxPages = 3
	cc := newCountingClient(db)
	sc, err := scan.New(scan.Config{Client: cc, Table: table, Plan: scan.Plan{Slots: 1, SubSegments: 4}, PageLimit: 20, MaxUnackedPages: maxPages})
	require.NoError(t, err)
	var held []*scan.Page
	ackedPages, full := 0, 0
	err = sc.Run(context.Background(), func(_ context.Context, p *scan.Page) error {
		held = append(held, p)
		calls, empty := cc.counts()
		outstanding := calls - empty - ackedPages
		require.LessOrEqual(t, outstanding, maxPages)
		if len(held) == maxPages {
			require.Equal(t, maxPages, outstanding, "reading stopped at the bound")
			full++
			for _, hp := range held[:2] {
				for i := len(hp.Items) - 1; i >= 0; i-- {
					hp.Items[i].Ack()
				}
				ackedPages++
			}
			held = held[2:]
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, full, 5)
	for _, hp := range held {
		for _, it := range hp.Items {
			it.Ack()
		}
	}
	require.True(t, sc.Done())
}

// scanGoroutines lists goroutines running code of package scan (not its tests).
func scanGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "dynapart/dynapart/scan.") {
			out = append(out, g)
		}
	}
	return out
}

var leakOpts = []goleak.Option{
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
}

// TestCancelStopsPromptly: cancelling ctx mid-scan returns promptly and leaves no goroutine.
// Not parallel: it counts goroutines.
func TestCancelStopsPromptly(t *testing.T) {
	defer goleak.VerifyNone(t, append(leakOpts, goleak.IgnoreCurrent())...)
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(t, db, table, makeItems("S", 1000, 0))
	sc, err := scan.New(scan.Config{Client: db, Table: table, Plan: scan.Plan{Slots: 1, SubSegments: 4}, PageLimit: 10})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pages := 0
	var cancelled time.Time
	err = sc.Run(ctx, func(_ context.Context, p *scan.Page) error {
		for _, it := range p.Items {
			it.Ack()
		}
		if pages++; pages == 3 {
			cancelled = time.Now()
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(cancelled), 5*time.Second)
	require.Empty(t, scanGoroutines(), "Run returned before its goroutines")
	require.False(t, sc.Done())
	require.Less(t, sc.Stats().Pages, int64(100), "reading stopped")
}

// TestAbandonedConsumer: fn blocks without acknowledging until ctx ends; the readers, blocked on
// backpressure, end too.
func TestAbandonedConsumer(t *testing.T) {
	defer goleak.VerifyNone(t, append(leakOpts, goleak.IgnoreCurrent())...)
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(t, db, table, makeItems("S", 500, 0))
	sc, err := scan.New(scan.Config{Client: db, Table: table, Plan: scan.Plan{Slots: 1, SubSegments: 4}, PageLimit: 10, MaxUnackedPages: 2})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- sc.Run(ctx, func(ctx context.Context, p *scan.Page) error {
			close(got)
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	<-got
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	require.Empty(t, scanGoroutines())
	require.LessOrEqual(t, sc.Stats().Pages, int64(2), "backpressure held reading")
	require.Equal(t, "", firstKeyOf(t, sc.Checkpoint()), "nothing acknowledged, nothing passed")
}

func firstKeyOf(t *testing.T, cp string) string {
	p, err := scan.DecodeCheckpoint(cp)
	require.NoError(t, err)
	for _, c := range p.Cursors {
		require.False(t, c.Done)
		if c.LastEvaluatedKey != nil {
			return fmt.Sprint(c.LastEvaluatedKey)
		}
	}
	return ""
}

// TestFnErrorStops: fn's error ends Run and is returned as is.
func TestFnErrorStops(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(t, db, table, makeItems("S", 300, 0))
	sc, err := scan.New(scan.Config{Client: db, Table: table, Plan: scan.Plan{Slots: 1}, PageLimit: 10})
	require.NoError(t, err)
	calls := 0
	err = sc.Run(context.Background(), func(context.Context, *scan.Page) error {
		calls++
		return errStop
	})
	require.ErrorIs(t, err, errStop)
	require.Equal(t, 1, calls)
	require.ErrorIs(t, sc.Run(context.Background(), nil), scan.ErrRunTwice)
}

// TestProjectionAndConsistentRead: only the asked-for attributes (plus keys) come back, reserved
// words included; a consistent scan costs twice the RCU of an eventually consistent one.
func TestProjectionAndConsistentRead(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(t, db, table, makeItems("S", 400, 500))
	got, sc := readAll(t, scan.Config{Client: db, Table: table, Plan: scan.Plan{Slots: 1}, Projection: []string{"size"}})
	require.Len(t, got, 400)
	for _, it := range got {
		require.Len(t, it, 2)
		require.Contains(t, it, "id")
		require.Contains(t, it, "size")
	}
	eventual := sc.Stats().RCU
	require.Positive(t, eventual, "DynamoDB reports consumed capacity")

	got, _ = readAll(t, scan.Config{Client: db, Table: table, Plan: scan.Plan{Mode: scan.ModeFilter, Slots: 2}, PartitionAttr: "grp", Projection: []string{}})
	for _, it := range got {
		require.NotContains(t, it, "size")
		require.NotContains(t, it, "pad")
	}

	got, sc = readAll(t, scan.Config{Client: db, Table: table, Plan: scan.Plan{Slots: 1}, ConsistentRead: true})
	require.Len(t, got, 400)
	require.Contains(t, got["S:user-000001"], "pad")
	require.InDelta(t, 2*eventual, sc.Stats().RCU, 0.1*eventual+2)
}

// TestReadRate: the scan stays under its RCU budget (one second of burst, then the rate), and no
// single request costs more than the bucket holds.
func TestReadRate(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(t, db, table, makeItems("S", 1500, 1000))
	cc := newCountingClient(db)
	const rate = 60.0
	sc, err := scan.New(scan.Config{Client: cc, Table: table, Plan: scan.Plan{Slots: 1, SubSegments: 2}, ReadRate: rate})
	require.NoError(t, err)
	start := time.Now()
	n := 0
	require.NoError(t, sc.Run(context.Background(), func(_ context.Context, p *scan.Page) error {
		for _, it := range p.Items {
			n++
			it.Ack()
		}
		return nil
	}))
	took := time.Since(start)
	st := sc.Stats()
	require.Equal(t, 1500, n)
	t.Logf("%.1f RCU in %v (%.1f RCU/s), %d pages, largest page %.1f RCU", st.RCU, took, st.RCU/took.Seconds(), st.Pages, cc.maxRCUPage)
	// 1500 items of ~1 KB cost about 190 RCU: at 60 RCU/s after a 60 RCU burst, over 2 s.
	require.Greater(t, st.RCU, 150.0)
	minTime := time.Duration((st.RCU - 2*rate) / rate * float64(time.Second))
	require.Greater(t, took, minTime, "the limit held")
	require.LessOrEqual(t, cc.maxRCUPage, rate, "no request overshoots the bucket")
	require.Greater(t, st.Pages, int64(6), "pages were sized down to the budget")
}

// throttlingTransport answers the first n Scan requests with a throttling error.
type throttlingTransport struct {
	next http.RoundTripper
	left atomic.Int64
}

func (tt *throttlingTransport) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".Scan") && tt.left.Add(-1) >= 0 {
		body := `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}`
		return &http.Response{StatusCode: 400, Status: "400 Bad Request", Request: req,
			Header: http.Header{"Content-Type": []string{"application/x-amz-json-1.0"}},
			Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}, nil
	}
	return tt.next.RoundTrip(req)
}

// TestThrottlesCounted: throttled attempts are retried by the SDK and counted per segment.
func TestThrottlesCounted(t *testing.T) {
	t.Parallel()
	tt := &throttlingTransport{next: ddbtest.HTTPClient.Transport}
	tt.left.Store(3)
	db := ddbtest.Client(t, func(o *dynamodb.Options) {
		o.HTTPClient = tt
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 10
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
			so.RateLimiter = ratelimit.None
		})
	})
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(t, db, table, makeItems("S", 200, 0))
	got, sc := readAll(t, scan.Config{Client: db, Table: table, Plan: scan.Plan{Slots: 1, SubSegments: 1}})
	require.Len(t, got, 200)
	st := sc.Stats()
	require.EqualValues(t, 3, st.Throttles)
	require.EqualValues(t, 3, st.Segments[0].Throttles)
	require.True(t, scan.IsThrottle(fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "ThrottlingException"})))
	require.False(t, scan.IsThrottle(&smithy.GenericAPIError{Code: "ValidationException"}))
	require.False(t, scan.IsThrottle(errStop))
}
