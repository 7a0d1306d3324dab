package scan

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
)

// tokensPerRCU: the bucket counts half read units, the smallest charge of an eventually
// consistent read, so that integer tokens lose nothing.
const tokensPerRCU = 2

// readLimiter holds a scanner to ReadRate RCU per second, shared by all its segments. DynamoDB
// only tells the cost of a read after it is done, so each request first waits for its estimated
// cost and is settled with the ConsumedCapacity it reports: an overrun is charged at once as debt,
// which delays the following requests; an over-estimate is kept as credit for the next one.
type readLimiter struct {
	lim   *rate.Limiter
	burst int

	mu      sync.Mutex
	credit  int     // tokens paid for but not consumed
	perItem float64 // RCU per scanned item, a moving average
	budget  float64 // RCU one request should cost at most
}

// newReadLimiter allows rate RCU/s with a burst of one second; parallel requests share it, so each
// request aims at rate/parallel RCU.
func newReadLimiter(rcu float64, parallel int, perItem float64) *readLimiter {
	burst := max(1, int(math.Ceil(rcu*tokensPerRCU)))
	return &readLimiter{
		lim:     rate.NewLimiter(rate.Limit(rcu*tokensPerRCU), burst),
		burst:   burst,
		perItem: perItem,
		budget:  max(0.5, rcu/float64(max(1, parallel))),
	}
}

// pageLimit is how many items one request may evaluate so that it costs about budget RCU.
func (l *readLimiter) pageLimit() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.budget / max(l.perItem, 1e-6)
	return int32(min(max(1, math.Floor(n)), 100_000))
}

// wait blocks until the bucket holds the estimated cost of a request (less any credit) and
// returns the tokens taken, for settle.
func (l *readLimiter) wait(ctx context.Context, estimateRCU float64) (int, error) {
	want := max(1, int(math.Ceil(estimateRCU*tokensPerRCU)))
	l.mu.Lock()
	need := want - l.credit
	l.credit = max(0, -need)
	l.mu.Unlock()
	var delay time.Duration
	for need > 0 {
		n := min(need, l.burst)
		r := l.lim.ReserveN(time.Now(), n)
		delay = max(delay, r.Delay())
		need -= n
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return want, ctx.Err()
		}
	}
	return want, nil
}

// settle charges the difference between the tokens taken and the capacity consumed, and learns
// the cost per item for the next page's Limit.
func (l *readLimiter) settle(taken int, consumedRCU float64, scanned int32) {
	used := int(math.Ceil(consumedRCU * tokensPerRCU))
	l.mu.Lock()
	if scanned > 0 && consumedRCU > 0 {
		l.perItem = 0.7*l.perItem + 0.3*consumedRCU/float64(scanned)
	}
	if used < taken {
		l.credit += taken - used
	}
	l.mu.Unlock()
	for debt := used - taken; debt > 0; debt -= l.burst {
		l.lim.ReserveN(time.Now(), min(debt, l.burst)) // not waited for: it delays the next requests
	}
}

// countThrottles returns a per-call option that counts into n every attempt DynamoDB throttles.
// The SDK's retryer retries throttled attempts on its own, so the scan never sees them as
// errors; this middleware sits just inside the retry loop (after the "Retry" finalize step) and so
// sees each attempt's result. Throttle codes are the retryer's own list
// (retry.DefaultThrottleErrorCodes, which includes ProvisionedThroughputExceededException).
func countThrottles(n *atomic.Int64) func(*dynamodb.Options) {
	mw := middleware.FinalizeMiddlewareFunc("dynapartCountThrottles",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			if IsThrottle(err) {
				n.Add(1)
			}
			return out, md, err
		})
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			if err := s.Finalize.Insert(mw, "Retry", middleware.After); err != nil {
				return s.Finalize.Add(mw, middleware.After)
			}
			return nil
		})
	}
}

// IsThrottle reports whether err is DynamoDB (or the AWS SDK) refusing a request for capacity.
func IsThrottle(err error) bool {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) {
		return false
	}
	_, ok := retry.DefaultThrottleErrorCodes[ae.ErrorCode()]
	return ok
}

// estimate is the expected cost of a request evaluating up to limit items; 0 (DynamoDB's 1 MB
// page) is estimated as a full megabyte.
func (l *readLimiter) estimate(limit int32) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit <= 0 {
		return 1 << 20 / 4096
	}
	return float64(limit) * l.perItem
}

// consumedRCU is the capacity a response consumed. DynamoDB (and DynamoDB Local) report it when
// asked with ReturnConsumedCapacity TOTAL; should an endpoint not, the cost is estimated from the
// returned items' sizes (a lower bound: projected-away attributes and filtered items cost too).
func consumedRCU(r response, consistent bool) float64 {
	if c := r.consumed; c != nil {
		if c.CapacityUnits != nil {
			return *c.CapacityUnits
		}
		if c.ReadCapacityUnits != nil {
			return *c.ReadCapacityUnits
		}
	}
	var size int
	for _, it := range r.items {
		size += itemSize(it)
	}
	units := math.Ceil(float64(size) / 4096)
	if !consistent {
		units /= 2
	}
	return units
}

// itemSize approximates DynamoDB's item size: attribute names plus values.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberSS:
		return sumOf(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sumOf(v.Value, func(s string) int { return len(s)/2 + 1 })
	case *types.AttributeValueMemberBS:
		return sumOf(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberM:
		return 3 + itemSize(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	}
	return 1 // BOOL, NULL
}

// sumOf adds size(x) over xs.
func sumOf[T any](xs []T, size func(T) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}
