package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Load shapes a load test: Batches batches of BatchSize receipts, consumed by Consumers consumers,
// each applying InFlight receipts of its batch at a time.
type Load struct {
	Batches, BatchSize, Consumers, InFlight int
	Campaigns                               int
	Seed                                    uint64
}

// Generate makes the receipts. Messages go out in waves of Consumers batches; each message gets
// IN_GATEWAY and SENT, most get DELIVERED, some OPENED, few CLICKED, and one receipt in ten comes
// twice (providers retry). A wave's receipts are shuffled together and cut into its batches, so
// the receipts of one message arrive out of order and in batches that are consumed at the same
// time, as they did in production.
func (l Load) Generate() [][]Event {
	r := rand.New(rand.NewPCG(l.Seed, 0x7ecb))
	wave := max(l.Consumers, 1)
	var out [][]Event
	msg := 0
	for len(out) < l.Batches {
		n := min(wave, l.Batches-len(out))
		var evs []Event
		for len(evs) < n*l.BatchSize {
			id := fmt.Sprintf("m-%07d", msg)
			campaign := fmt.Sprintf("c-%d", msg%max(l.Campaigns, 1))
			msg++
			last := Sent
			switch p := r.Float64(); {
			case p < 0.10:
				last = Clicked
			case p < 0.40:
				last = Opened
			case p < 0.90:
				last = Delivered
			}
			for s := InGateway; s <= last; s++ {
				evs = append(evs, Event{MessageID: id, Campaign: campaign, Status: s})
				if r.IntN(10) == 0 {
					evs = append(evs, Event{MessageID: id, Campaign: campaign, Status: s})
				}
			}
		}
		evs = evs[:n*l.BatchSize]
		r.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		for b := range n {
			out = append(out, evs[b*l.BatchSize:(b+1)*l.BatchSize])
		}
	}
	return out
}

// LoadResult is what one run measured.
type LoadResult struct {
	Events       int
	Elapsed      time.Duration
	MeanBatch    time.Duration // mean time from a batch's first receipt to its last one done
	EventsPerSec float64
}

// Consume feeds the batches to l.Consumers consumers; each applies its batch's receipts with
// l.InFlight goroutines and takes the next batch when the batch is done. It stops at the first
// error.
func (l Load) Consume(ctx context.Context, batches [][]Event, apply func(context.Context, Event) error) (LoadResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan []Event)
	var (
		mu         sync.Mutex
		batchTotal time.Duration
		events     int
	)
	start := time.Now()
	var consumers sync.WaitGroup
	for range max(l.Consumers, 1) {
		consumers.Go(func() {
			for batch := range queue {
				t0 := time.Now()
				if err := applyBatch(ctx, batch, max(l.InFlight, 1), apply); err != nil {
					cancel(err)
					return
				}
				took := time.Since(t0)
				mu.Lock()
				batchTotal += took
				events += len(batch)
				mu.Unlock()
			}
		})
	}
feed:
	for _, b := range batches {
		select {
		case queue <- b:
		case <-ctx.Done():
			break feed
		}
	}
	close(queue)
	consumers.Wait()
	if err := context.Cause(ctx); err != nil {
		return LoadResult{}, err
	}
	res := LoadResult{Events: events, Elapsed: time.Since(start)}
	if len(batches) > 0 {
		res.MeanBatch = batchTotal / time.Duration(len(batches))
	}
	res.EventsPerSec = float64(events) / res.Elapsed.Seconds()
	return res, nil
}

func applyBatch(ctx context.Context, batch []Event, inFlight int, apply func(context.Context, Event) error) error {
	next := make(chan Event)
	errs := make(chan error, inFlight)
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for ev := range next {
				if err := apply(ctx, ev); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
send:
	for _, ev := range batch {
		select {
		case next <- ev:
		case err = <-errs:
			break send
		case <-ctx.Done():
			err = context.Cause(ctx)
			break send
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// Check compares the table with what the receipts imply: every message at the highest status it
// received, and every campaign's funnel equal to the counts of the final statuses. It returns the
// number of messages whose status is not their highest (WrongStatus) and of funnel counters that
// differ (WrongCounters).
func Check(st State, batches [][]Event) (wrongStatus, wrongCounters int) {
	want, reached := expected(batches)
	for id, w := range want {
		if st.Messages[id] != w {
			wrongStatus++
		}
	}
	for c, r := range reached {
		for _, s := range Statuses {
			if st.Funnels[c].Reached[s] != r[s] {
				wrongCounters++
			}
		}
	}
	return wrongStatus, wrongCounters
}

// Miscount sums the funnel's errors: missing, the counts its counters lack (a message that
// reached a stage and was not counted there), and extra, the counts they have too many (a
// message counted twice).
func Miscount(st State, batches [][]Event) (missing, extra int) {
	_, reached := expected(batches)
	for c, r := range reached {
		for _, s := range Statuses {
			d := r[s] - st.Funnels[c].Reached[s]
			missing += max(d, 0)
			extra += max(-d, 0)
		}
	}
	return missing, extra
}

// expected is what the receipts imply: each message's highest status, and per campaign the number
// of messages that reached each stage.
func expected(batches [][]Event) (want map[string]Status, reached map[string]map[Status]int) {
	want = map[string]Status{}
	campaignOf := map[string]string{}
	for _, b := range batches {
		for _, ev := range b {
			want[ev.MessageID] = max(want[ev.MessageID], ev.Status)
			campaignOf[ev.MessageID] = ev.Campaign
		}
	}
	reached = map[string]map[Status]int{}
	for id, w := range want {
		c := campaignOf[id]
		if reached[c] == nil {
			reached[c] = map[Status]int{}
		}
		for s := InGateway; s <= w; s++ {
			reached[c][s]++
		}
	}
	return want, reached
}
