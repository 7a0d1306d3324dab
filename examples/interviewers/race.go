package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
)

// AddFunc adds an interviewer to an interview unless present; between (possibly nil) runs between
// the check and the insert when the implementation has such a window.
type AddFunc func(ctx context.Context, interviewID, interviewer, source string, between func()) (added bool, err error)

// RaceResult is what a race of calendar updates left behind.
type RaceResult struct {
	Updates    int           // calendar updates, each applied by both the web request and the poller
	Duplicates int           // interviews whose interviewer ended up on more than one row
	MeanAdd    time.Duration // mean time of one add call (web request or poller)
}

// Race applies updates calendar updates ("add <interviewer> to interview <prefix>-<i>"), each one
// at the same time from the web request and from the background poller, and counts the
// interviews that end with the interviewer twice. Both sides start together; with forceOverlap
// both also finish their check before either inserts (a barrier passed as between), which is the
// interleaving of the incident, made certain instead of likely.
func Race(ctx context.Context, s *Store, add AddFunc, prefix string, updates int, forceOverlap bool) (RaceResult, error) {
	res := RaceResult{Updates: updates}
	var total time.Duration
	for i := range updates {
		id := fmt.Sprintf("%s-%04d", prefix, i)
		const interviewer = "ada@example.com"
		start := exampleutil.NewBarrier(2)
		var between func()
		if forceOverlap {
			b := exampleutil.NewBarrier(2)
			between = func() { b.Wait(ctx) }
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		took := make([]time.Duration, 2)
		for side, source := range []string{"web-request", "poller"} {
			wg.Go(func() {
				start.Wait(ctx)
				t0 := time.Now()
				_, errs[side] = add(ctx, id, interviewer, source, between)
				took[side] = time.Since(t0)
			})
		}
		wg.Wait()
		for side := range errs {
			if errs[side] != nil {
				return res, errs[side]
			}
			total += took[side]
		}
		got, err := s.Interviewers(ctx, id)
		if err != nil {
			return res, err
		}
		if len(got) > 1 {
			res.Duplicates++
		}
	}
	if updates > 0 {
		res.MeanAdd = total / time.Duration(2*updates)
	}
	return res, nil
}

// MeanUncontended is the mean time of n adds to fresh interviews, one at a time: the price of the
// mechanism itself, without waiting for anyone.
func MeanUncontended(ctx context.Context, add AddFunc, prefix string, n int) (time.Duration, error) {
	t0 := time.Now()
	for i := range n {
		if _, err := add(ctx, fmt.Sprintf("%s-%04d", prefix, i), "grace@example.com", "web-request", nil); err != nil {
			return 0, err
		}
	}
	if n == 0 {
		return 0, nil
	}
	return time.Since(t0) / time.Duration(n), nil
}
