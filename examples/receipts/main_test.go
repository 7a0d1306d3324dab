package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

func TestMain(m *testing.M) {
	// A crash run's workers are this test binary started again as children.
	exampleutil.RunIfChild(RunChild)
	ddbtest.Main(m)
}

func newTables(t testing.TB, db *dynamodb.Client) (state func() string, leases string) {
	t.Helper()
	leases = ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(context.Background(), db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	return func() string { return ddbtest.CreateTable(t, db, ddbtest.Key{Name: attrID, Type: "S"}) }, leases
}

// TestNaiveStatusGoesBackwards reproduces the bug: DELIVERED and SENT receipts of one message both
// read the message before either writes; DELIVERED writes first, SENT writes last and wins. Every
// message ends SENT although it was delivered, and both receipts counted SENT in the funnel.
func TestNaiveStatusGoesBackwards(t *testing.T) {
	const messages = 10
	db := ddbtest.Client(t)
	newState, _ := newTables(t, db)
	s := &Store{DB: db, Table: newState()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var batch []Event
	for i := range messages {
		id := fmt.Sprintf("m-%d", i)
		both := exampleutil.NewBarrier(2)
		delivered := make(chan struct{})
		hooks := NaiveHooks{
			AfterRead: func(ev Event) {
				both.Wait(ctx) // both receipts have read the message
				if ev.Status == Sent {
					select { // SENT writes only after DELIVERED has written
					case <-delivered:
					case <-ctx.Done():
					}
				}
			},
			AfterWrite: func(ev Event) {
				if ev.Status == Delivered {
					close(delivered)
				}
			},
		}
		var wg sync.WaitGroup
		for _, st := range []Status{Delivered, Sent} {
			ev := Event{MessageID: id, Campaign: "c-0", Status: st}
			batch = append(batch, ev)
			wg.Go(func() { assert.NoError(t, s.ApplyNaive(ctx, ev, hooks)) })
		}
		wg.Wait()
	}
	st, err := s.ReadState(ctx)
	require.NoError(t, err)
	for i := range messages {
		require.Equal(t, Sent, st.Messages[fmt.Sprintf("m-%d", i)], "the late SENT must have overwritten DELIVERED")
	}
	wrongStatus, wrongCounters := Check(st, [][]Event{batch})
	require.Equal(t, messages, wrongStatus)
	require.Positive(t, wrongCounters)
	require.Equal(t, 2*messages, st.Funnels["c-0"].Reached[Sent], "both receipts counted SENT")

	// The same receipts, in the same order, applied optimistically: DELIVERED stays.
	s2 := &Store{DB: db, Table: newState()}
	for _, ev := range batch {
		require.NoError(t, s2.ApplyOptimistic(ctx, ev))
	}
	st2, err := s2.ReadState(ctx)
	require.NoError(t, err)
	wrongStatus, wrongCounters = Check(st2, [][]Event{batch})
	require.Zero(t, wrongStatus)
	require.Zero(t, wrongCounters)
}

// TestOptimisticAndPessimisticAgree consumes the same out-of-order, parallel receipts optimistically
// and with a lock per message: both leave every message at its highest receipt, both funnels match
// the final statuses, and the two tables are identical.
func TestOptimisticAndPessimisticAgree(t *testing.T) {
	db := ddbtest.Client(t)
	newState, leases := newTables(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	load := Load{Batches: 4, BatchSize: 150, Consumers: 2, InFlight: 4, Campaigns: 2, Seed: 7}
	batches := load.Generate()
	require.Len(t, batches, load.Batches)

	outs := map[Mode]Outcome{}
	for _, mode := range []Mode{Optimistic, Pessimistic} {
		out, err := Run(ctx, db, newState(), leases, mode, load, batches)
		require.NoError(t, err)
		require.Zero(t, out.WrongStatus, "%s: messages below their highest receipt", mode)
		require.Zero(t, out.WrongCounters, "%s: funnel counters wrong", mode)
		require.Equal(t, load.Batches*load.BatchSize, out.Events)
		outs[mode] = out
		t.Logf("%s: %.0f events/s, mean batch %.0f ms", mode, out.EventsPerSec, exampleutil.Ms(out.MeanBatch))
	}
	require.True(t, SameStatuses(outs[Optimistic].State, outs[Pessimistic].State))
}

// TestCrashedWorkersDriftButEffectsStayExact parks the same out-of-order receipts in an inbox
// three times and consumes them with dynapart workers (child processes of this test), two of which
// are SIGKILLed in the middle of a receipt while two fresh workers take over and finish. With the
// plain optimistic handler and the pessimistic one (a lock per message), each kill lands a
// message's status write and never sends its funnel write: the statuses are right, the funnel
// misses counts. With the effects, status and counters commit with the receipt's completion:
// every status and every counter exact, every receipt done once.
func TestCrashedWorkersDriftButEffectsStayExact(t *testing.T) {
	db := ddbtest.Client(t)
	endpoint := ddbtest.Endpoint(t)
	load := Load{Batches: 2, BatchSize: 60, Consumers: 2, InFlight: 1, Campaigns: 2, Seed: 11}
	batches := load.Generate()
	for _, mode := range []Mode{Optimistic, Pessimistic, Effects} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			newState, leases := newTables(t, db)
			tables := Tables{Inbox: ddbtest.CreateTable(t, db, ddbtest.Key{Name: attrID, Type: "S"}), State: newState(), Leases: leases}
			out, err := CrashRun(ctx, db, endpoint, tables, mode, batches)
			require.NoError(t, err)
			t.Logf("%s: kills %q; %d receipts: %d done, %d failed; messages wrong %d; counters wrong %d (missing %d, extra %d)",
				mode, out.Kills, out.Receipts, out.Ledger.Done, out.Ledger.Failed, out.WrongStatus, out.WrongCounters, out.Missing, out.Extra)
			require.Len(t, out.Kills, 2)
			require.Equal(t, int64(out.Receipts), out.Ledger.Done, "every receipt is done")
			require.Zero(t, out.Ledger.Failed)
			require.Zero(t, out.WrongStatus, "every message at its highest receipt")
			require.Zero(t, out.Extra, "no message counted twice")
			if mode == Effects {
				require.Zero(t, out.WrongCounters, "every funnel counter exact")
				require.Zero(t, out.Missing)
				return
			}
			require.GreaterOrEqual(t, out.Missing, 2, "each kill loses the funnel write of a status that moved")
		})
	}
}

var (
	benchBatches   = flag.Int("receipts.batches", 100, "BenchmarkReceipts: batches")
	benchBatchSize = flag.Int("receipts.batch-size", 1000, "BenchmarkReceipts: receipts per batch")
	benchConsumers = flag.Int("receipts.consumers", 10, "BenchmarkReceipts: consumers")
	benchInFlight  = flag.Int("receipts.in-flight", 4, "BenchmarkReceipts: receipts in flight per consumer")
)

// BenchmarkReceipts runs the load test's shape (the published one: 1,000 batches of 1,000) at
// -receipts.batches batches, optimistic then pessimistic on fresh tables, reports events/s and
// mean batch latency of both, and fails unless they leave identical, correct state.
//
//	DYNAPART_TEST_ENDPOINT=http://127.0.0.1:8765 go test -run '^$' -bench Receipts -benchtime 1x -timeout 30m ./examples/receipts
func BenchmarkReceipts(b *testing.B) {
	db := ddbtest.Client(b)
	newState, leases := newTables(b, db)
	load := Load{Batches: *benchBatches, BatchSize: *benchBatchSize, Consumers: *benchConsumers, InFlight: *benchInFlight, Campaigns: 5, Seed: 1}
	batches := load.Generate()
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		outs := map[Mode]Outcome{}
		for _, mode := range []Mode{Optimistic, Pessimistic} {
			b.StopTimer()
			table := newState()
			b.StartTimer()
			out, err := Run(ctx, db, table, leases, mode, load, batches)
			if err != nil {
				b.Fatal(err)
			}
			if out.WrongStatus != 0 || out.WrongCounters != 0 {
				b.Fatalf("%s: %d messages below their highest receipt, %d funnel counters wrong", mode, out.WrongStatus, out.WrongCounters)
			}
			outs[mode] = out
		}
		if !SameStatuses(outs[Optimistic].State, outs[Pessimistic].State) {
			b.Fatal("optimistic and pessimistic final states differ")
		}
		o, p := outs[Optimistic], outs[Pessimistic]
		b.ReportMetric(o.EventsPerSec, "opt_events/s")
		b.ReportMetric(p.EventsPerSec, "pess_events/s")
		b.ReportMetric(exampleutil.Ms(o.MeanBatch), "opt_batch_ms")
		b.ReportMetric(exampleutil.Ms(p.MeanBatch), "pess_batch_ms")
		b.ReportMetric(o.EventsPerSec/p.EventsPerSec, "speedup")
	}
}
