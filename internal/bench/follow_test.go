package bench

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/worker"
)

// followFigures is a follow scenario with fixed figures: follow reads 1 RCU per change until the
// drain (0.97 in the window), rescans every 30 s read 12 per change in the window (14 until the
// drain), rescans every 1 s 1,200.
func followFigures() *Follow {
	const table = "bench-follow-0"
	bill := func(rcu, wcu, leaseRCU, leaseWCU float64) Bill {
		return Bill{Tables: map[string]TableBill{table: {Units: Units{RCU: rcu, WCU: wcu}}, "bench-leases-0": {Units: Units{RCU: leaseRCU, WCU: leaseWCU}}}}
	}
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	return &Follow{
		Config:   FollowConfig{Items: 20000, Window: 3 * time.Minute, WriteEvery: 600 * time.Millisecond, Polls: []time.Duration{30 * time.Second, time.Second}}.withDefaults(),
		Table:    table,
		Backfill: 40 * time.Second,
		Runs: []*FollowRun{
			{Follow: true, Poll: time.Second, Changes: 300, Latencies: ms(100, 200, 300, 400, 500, 600, 700, 800, 900, 1000),
				Window:  FollowCounts{Span: 180 * time.Second, FollowRCU: 291, WCU: 870, Bill: bill(291, 870, 0, 60)},
				Drained: FollowCounts{Span: 182 * time.Second, FollowRCU: 300, WCU: 900, Bill: bill(300, 900, 3, 90), Stream: StreamCalls{GetRecords: 240, GetShardIterator: 3, DescribeStream: 57}}},
			{Poll: 30 * time.Second, Changes: 300, Superseded: 1, Latencies: ms(5000, 15000, 29000),
				Window:  FollowCounts{Span: 180 * time.Second, ScanRCU: 3600, WCU: 500, Passes: 6, Bill: bill(3600, 500, 6, 120)},
				Drained: FollowCounts{Span: 215 * time.Second, ScanRCU: 4200, WCU: 600, Passes: 7, Bill: bill(4200, 600, 7, 150)}},
			{Poll: time.Second, Changes: 300, Unseen: 2, Latencies: ms(900, 1500, 2500),
				Window:  FollowCounts{Span: 180 * time.Second, ScanRCU: 360000, WCU: 596, Passes: 60, Bill: bill(360000, 596, 60, 300)},
				Drained: FollowCounts{Span: 183 * time.Second, ScanRCU: 366000, WCU: 600, Passes: 61, Bill: bill(366000, 600, 61, 305)}},
		},
	}
}

// TestFollowArithmetic: reads are counted until the drain for follow and over the window for
// rescans, writes until the drain for both; the ratio's goal is at the default poll only.
func TestFollowArithmetic(t *testing.T) {
	f := followFigures()
	fw, r30, r1 := f.Runs[0], f.Runs[1], f.Runs[2]
	require.Equal(t, 1.0, fw.RCUPerChange())
	require.Equal(t, 12.0, r30.RCUPerChange())
	require.Equal(t, 1200.0, r1.RCUPerChange())
	require.Equal(t, 3.0, fw.WCUPerChange())
	require.Equal(t, 2.0, r30.WCUPerChange())
	require.Equal(t, Units{RCU: 12, WCU: 2}, r30.BilledPerChange(f.Table))
	require.Equal(t, Units{RCU: 0.01, WCU: 0.3}, fw.LeasePerChange(f.Table))
	require.Equal(t, Units{RCU: 0.02, WCU: 0.4}, r30.LeasePerChange(f.Table))
	require.Equal(t, 1.0, fw.StreamPerChange())
	require.Equal(t, Sample{12}, f.ReadRatio(r30))
	require.Equal(t, Sample{1200}, f.ReadRatio(r1))
	require.Equal(t, 500*time.Millisecond, fw.Percentile(0.5))
	require.Equal(t, 1000*time.Millisecond, fw.Percentile(0.95))
	require.Equal(t, 1000*time.Millisecond, fw.Percentile(1))
	require.Equal(t, 100*time.Millisecond, fw.Percentile(0))
	require.Equal(t, time.Duration(-1), (&FollowRun{}).Percentile(0.5))
	require.Equal(t, "rescans every 30s", r30.Name())
	require.Equal(t, "follow (stream poll 1s)", fw.Name())

	r := &Results{Options: Options{}.withDefaults(), Errors: map[string]string{}, Follow: f}
	md := r.Markdown(nil)
	for _, want := range []string{
		"## Following the stream versus continuous rescans",
		"| figure | follow (stream poll 1s) | rescans every 30s | rescans every 1s |",
		"| **read units per change** (Stats: scans + reads of changed items) | **1.00** | **12.00** | **1,200.00** |",
		"| **rescans ÷ follow, read units per change** | 1x | **12.00x ✗** (goal >= 100x) | **1,200.00x** |",
		"| write units per change (Stats: the ledger's writes) | 3.00 | 2.00 | 2.00 |",
		"| stream requests per change (GetRecords / GetShardIterator / DescribeStream) | 1.00 (240 / 3 / 57) | – | – |",
		"| passes over the share in the window; read units per pass | 0 | 6; 600 | 60; 6,000 |",
		"its first pass is the back-fill (40.00 s, not measured)", "changes 100 random items a minute for 180 s (an UpdateItem every 600ms",
		"| **write → handler: p50 / p95 / max** | **0.50 s / 1.00 s / 1.00 s** | **15.00 s / 29.00 s / 29.00 s** |",
		"| changes superseded (a later change of the item handled first) / never handled | 0 / 0 | 1 / 0 | 0 / 2 |",
		"| follow vs continuous rescans every 30s (the default poll), 20,000 items, 100 changes a minute: read units per change | >= 100x fewer (issue 35) | 12.00x ✗ (rescans 12.000, follow 1.000 RCU per change) | **NOT met** |",
		"| … vs rescans every 1s (a poll with follow's latency) | reported | 1,200.00x (rescans 1,200.00 RCU per change) | – |",
		"| follow and rescans: every change of the window handled | all (or superseded by a later change of the item) | follow (stream poll 1s): 0 of 300 unhandled<br>rescans every 30s: 0 of 300 unhandled<br>rescans every 1s: 2 of 300 unhandled | **NOT met** |",
	} {
		require.Contains(t, md, want)
	}

	// Just below the goal is missed, shown with the decimals that tell it; at the goal it is met.
	r30.Window.ScanRCU = 29998.5
	require.Contains(t, r.Markdown(nil), "| 99.995x ✗ (rescans 99.995, follow 1.000 RCU per change) | **NOT met** |")
	r30.Window.ScanRCU = 30000
	r1.Unseen = 0
	md = r.Markdown(nil)
	require.Contains(t, md, "| >= 100x fewer (issue 35) | 100.00x (rescans 100.000, follow 1.000 RCU per change) | met |")
	require.Contains(t, md, "| follow and rescans: every change of the window handled | all (or superseded by a later change of the item) | follow (stream poll 1s): 0 of 300 unhandled<br>rescans every 30s: 0 of 300 unhandled<br>rescans every 1s: 0 of 300 unhandled | met |")

	r.Follow = nil
	r.Errors[ScenarioFollow] = "boom"
	require.Contains(t, r.Markdown(nil), "## Following the stream versus continuous rescans\n\n*Not measured in this run: boom.*")
}

// The change log tells seen, superseded and unseen changes apart and matches the handler's sight
// by the written value.
func TestFollowChangeLog(t *testing.T) {
	l := newChangeLog(10, "chg-x-")
	t0 := time.Now()
	a := l.wrote(3, t0)                  // seen after 2 s
	l.wrote(4, t0)                       // superseded by d
	c := l.wrote(5, t0)                  // never seen
	d := l.wrote(4, t0.Add(time.Second)) // seen 0.5 s after its write
	require.Equal(t, 4, l.pending())
	see := func(seq int, after time.Duration) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.changes[seq].seen = l.changes[seq].wrote.Add(after)
	}
	see(a, 2*time.Second)
	require.NoError(t, l.handler(context.Background(), worker.Item{Attrs: map[string]types.AttributeValue{
		"payload": &types.AttributeValueMemberS{Value: l.value(d)}}}))
	require.NoError(t, l.handler(context.Background(), worker.Item{Attrs: map[string]types.AttributeValue{
		"payload": &types.AttributeValueMemberS{Value: "chg-y-2"}}})) // another run's change
	see(d, 500*time.Millisecond) // the handler saw it; its time fixed here
	lat, superseded, unseen := l.tally()
	require.Equal(t, []time.Duration{500 * time.Millisecond, 2 * time.Second}, lat)
	require.Equal(t, 1, superseded)
	require.Equal(t, 1, unseen)
	require.Equal(t, 1, l.pending())
	require.Equal(t, 2, l.seenCount())
	require.Equal(t, "chg-x-2", l.value(c))
}

// TestFollowScenario runs a short follow scenario on DynamoDB Local (2,000 items, a 20 s window
// per run): every change reaches the handler in every run; follow reads about one unit per change
// and scans nothing; the rescans every second scan the table several times in the window and read
// far more per change.
func TestFollowScenario(t *testing.T) {
	env := &Env{DB: ddbtest.Client(t), Endpoint: ddbtest.Endpoint(t), Streams: ddbtest.Streams(t), Progress: testWriter{t}}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	f, err := env.MeasureFollow(ctx, FollowConfig{Items: 2000, Window: 20 * time.Second})
	require.NoError(t, err)
	require.Len(t, f.Runs, 3)
	fw, r30, r1 := f.Runs[0], f.Runs[1], f.Runs[2]
	require.True(t, fw.Follow)
	require.Equal(t, time.Second, fw.Poll)
	require.Equal(t, 30*time.Second, r30.Poll)
	for _, run := range f.Runs {
		require.InDelta(t, 34, run.Changes, 1, run.Name()) // 20 s / 600 ms, the first at once
		require.Zero(t, run.Unseen, run.Name())
		require.Len(t, run.Latencies, run.Changes-run.Superseded, run.Name())
		require.GreaterOrEqual(t, run.WCUPerChange(), 1.9, run.Name()) // a claim and a completion at least
	}
	require.Zero(t, fw.Drained.ScanRCU)
	require.Zero(t, fw.Drained.Passes)
	require.InDelta(t, 0, fw.RCUPerChange(), 0.5) // no read per change: the renew says the state, the claim returns the item
	require.Positive(t, fw.Drained.Stream.GetRecords)
	require.Less(t, fw.Percentile(0.95), 5*time.Second)
	require.GreaterOrEqual(t, r1.Window.Passes, int64(3))
	require.Greater(t, r1.RCUPerChange(), 5*fw.RCUPerChange())
	require.Greater(t, r30.Percentile(0.5), fw.Percentile(0.5))

	r := &Results{Options: Options{Quick: true}.withDefaults(), Errors: map[string]string{}, Follow: f}
	require.Contains(t, r.Markdown(nil), "| follow vs continuous rescans every 30s (the default poll), 2,000 items, 100 changes a minute: read units per change | >= 100x fewer (issue 35) |")
}
