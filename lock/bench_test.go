package lock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAcquire64For32 starts 64 contenders together on an empty group of 32 slots and measures
// the time until all 32 are held and the DynamoDB calls each contender made by then (a counting
// wrapper): winners count up to their acquisition, standbys up to the moment the last slot was
// taken. Goals: all held within 2 s, median calls per contender <= 3.
func BenchmarkAcquire64For32(b *testing.B) {
	db, table := lockTable(b)
	const contenders, slots = 64, 32
	var allHeld []time.Duration
	var medians, maxes, winnerMedians []float64
	for i := 0; b.Loop(); i++ {
		group := fmt.Sprintf("bench-%d", i)
		counters := make([]*faultyDB, contenders)
		clients := make([]*Client, contenders)
		for j := range contenders {
			counters[j] = newFaultyDB(db)
			c, err := New(counters[j], table, WithOwner(fmt.Sprintf("c%02d", j)))
			if err != nil {
				b.Fatal(err)
			}
			clients[j] = c
		}
		ctx, cancel := context.WithCancel(context.Background())
		start := make(chan struct{})
		var (
			wg      sync.WaitGroup
			held    atomic.Int32
			elapsed time.Duration
			mu      sync.Mutex
			leases  []*Lease
			calls   = make([]int64, contenders)
			won     = make([]bool, contenders)
			began   time.Time
		)
		for j := range contenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				l, err := clients[j].AcquireSlot(ctx, group, slots)
				if err != nil {
					return // a standby, cancelled once every slot is held
				}
				calls[j], won[j] = counters[j].calls.Load(), true
				mu.Lock()
				leases = append(leases, l)
				mu.Unlock()
				if held.Add(1) == slots {
					elapsed = time.Since(began)
					cancel()
				}
			}()
		}
		began = time.Now()
		close(start)
		wg.Wait()
		cancel()
		var all, winners []float64
		for j := range contenders {
			if won[j] {
				winners = append(winners, float64(calls[j]))
				all = append(all, float64(calls[j]))
			} else {
				all = append(all, float64(counters[j].calls.Load()))
			}
		}
		if held.Load() != slots {
			b.Fatalf("only %d of %d slots held", held.Load(), slots)
		}
		allHeld = append(allHeld, elapsed)
		medians = append(medians, median(all))
		winnerMedians = append(winnerMedians, median(winners))
		maxes = append(maxes, slices.Max(all))
		for _, l := range leases {
			_ = l.Release(context.Background())
		}
	}
	reportAcquire(b, allHeld, medians, winnerMedians, maxes)
}

// reportAcquire reports BenchmarkAcquire64For32's metrics from its iterations' measurements.
func reportAcquire(b *testing.B, allHeld []time.Duration, medians, winnerMedians, maxes []float64) {
	var sum time.Duration
	for _, d := range allHeld {
		sum += d
	}
	b.ReportMetric(float64(sum.Milliseconds())/float64(len(allHeld)), "ms-all-held")
	b.ReportMetric(float64(slices.Max(allHeld).Milliseconds()), "ms-all-held-max")
	b.ReportMetric(mean(medians), "median-calls/contender")
	b.ReportMetric(mean(winnerMedians), "median-calls/winner")
	b.ReportMetric(slices.Max(maxes), "max-calls/contender")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
