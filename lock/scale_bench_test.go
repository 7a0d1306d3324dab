package lock

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

var lockScaleN = flag.String("lockscale.n", "10,100,1000", "group sizes of BenchmarkStandbyPollRCU and BenchmarkFleetAcquire")

func lockScaleSizes(b *testing.B) []int {
	var ns []int
	for _, f := range strings.Split(*lockScaleN, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-lockscale.n %q: want positive integers separated by commas", *lockScaleN)
		}
		ns = append(ns, n)
	}
	return ns
}

// BenchmarkStandbyPollRCU measures a waiting standby's polls of a group of n slots that are all
// held: the read capacity DynamoDB reports for each (ConsumedCapacity), its calls and the items it
// reads, and the items its first round read (a sweep of every window, once per AcquireSlot).
// Goal: flat in n.
func BenchmarkStandbyPollRCU(b *testing.B) {
	db, table := lockTable(b)
	for _, n := range lockScaleSizes(b) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			group := fmt.Sprintf("poll-%d", n)
			heldGroup(b, db, table, group, n)
			var rcu, calls, items, first []float64
			for b.Loop() {
				c := standbyPolls(b, db, table, group, n, 20)
				rcu, calls, items, first = append(rcu, c.rcu), append(calls, c.calls), append(items, c.items), append(first, c.firstItems)
			}
			b.ReportMetric(mean(rcu), "RCU/poll")
			b.ReportMetric(mean(calls), "calls/poll")
			b.ReportMetric(mean(items), "items/poll")
			b.ReportMetric(mean(first), "items-first-round")
		})
	}
}

// BenchmarkFleetAcquire starts n lock clients together on an empty group of n slots (default poll
// interval) and measures the time until all n are held, the calls each made until it won and the
// read and write capacity of the whole fleet.
func BenchmarkFleetAcquire(b *testing.B) {
	db, table := lockTable(b)
	for _, n := range lockScaleSizes(b) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var allHeld, medians, maxes, rcus, wcus []float64
			for i := 0; b.Loop(); i++ {
				res := fleetAcquireOnce(b, db, table, fmt.Sprintf("fleet-%d-%d", n, i), n)
				allHeld = append(allHeld, float64(res.elapsed.Milliseconds()))
				medians, maxes = append(medians, median(res.calls)), append(maxes, slices.Max(res.calls))
				rcus, wcus = append(rcus, res.rcu), append(wcus, res.wcu)
			}
			b.ReportMetric(mean(allHeld), "ms-all-held")
			b.ReportMetric(mean(medians), "median-calls/worker")
			b.ReportMetric(slices.Max(maxes), "max-calls/worker")
			b.ReportMetric(mean(rcus), "RCU-total")
			b.ReportMetric(mean(wcus), "WCU-total")
		})
	}
}

type fleetResult struct {
	elapsed  time.Duration
	calls    []float64
	rcu, wcu float64
}

func fleetAcquireOnce(b *testing.B, db *dynamodb.Client, table, group string, n int) fleetResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cdbs := make([]*capacityDB, n)
	clients := make([]*Client, n)
	for j := range n {
		cdbs[j] = newCapacityDB(db)
		c, err := New(cdbs[j], table, WithOwner(fmt.Sprintf("w%04d", j)))
		if err != nil {
			b.Fatal(err)
		}
		clients[j] = c
	}
	var (
		wg     sync.WaitGroup
		held   atomic.Int32
		mu     sync.Mutex
		leases []*Lease
		res    = fleetResult{calls: make([]float64, n)}
		start  = make(chan struct{})
		began  time.Time
		done   = make(chan time.Duration, 1)
		failed atomic.Pointer[error]
	)
	for j := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := clients[j].AcquireSlot(ctx, group, n)
			if err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			res.calls[j] = float64(cdbs[j].calls.Load())
			mu.Lock()
			leases = append(leases, l)
			mu.Unlock()
			if held.Add(1) == int32(n) {
				done <- time.Since(began)
			}
		}()
	}
	began = time.Now()
	close(start)
	wg.Wait()
	if e := failed.Load(); e != nil {
		b.Fatalf("%d of %d held: %v", held.Load(), n, *e)
	}
	res.elapsed = <-done
	for _, c := range cdbs {
		r, w := c.capacity()
		res.rcu, res.wcu = res.rcu+r, res.wcu+w
	}
	for _, l := range leases {
		_ = l.Release(context.Background())
	}
	return res
}
