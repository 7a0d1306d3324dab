package scan

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/capacity"
)

// tokensPerRCU: the bucket counts half read units, the smallest charge of an eventually
// consistent read, so that integer tokens lose nothing.
const tokensPerRCU = 2

// readLimiter holds a scanner to ReadRate RCU per second, shared by all its segments, with a
// capacity.Bucket (each request waits for its estimated cost and is settled on the
// ConsumedCapacity it reports); it learns the cost per item to size the pages.
type readLimiter struct {
	bucket *capacity.Bucket

	mu      sync.Mutex
	perItem float64 // RCU per scanned item, a moving average
	budget  float64 // RCU one request should cost at most
}

// newReadLimiter allows rate RCU/s with a burst of one second; parallel requests share it, so each
// request aims at rate/parallel RCU.
func newReadLimiter(rcu float64, parallel int, perItem float64) *readLimiter {
	return &readLimiter{
		bucket:  capacity.NewBucket(rcu, tokensPerRCU),
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
	return l.bucket.Wait(ctx, estimateRCU)
}

// settle charges the difference between the tokens taken and the capacity consumed, and learns
// the cost per item for the next page's Limit.
func (l *readLimiter) settle(taken int, consumedRCU float64, scanned int32) {
	l.mu.Lock()
	if scanned > 0 && consumedRCU > 0 {
		l.perItem = 0.7*l.perItem + 0.3*consumedRCU/float64(scanned)
	}
	l.mu.Unlock()
	l.bucket.Settle(taken, consumedRCU)
}

// countThrottles returns a per-call option that counts into n every attempt DynamoDB throttles
// (see capacity.CountThrottles).
func countThrottles(n *atomic.Int64) func(*dynamodb.Options) { return capacity.CountThrottles(n) }

// IsThrottle reports whether err is DynamoDB (or the AWS SDK) refusing a request for capacity
// (the codes the SDK's retryer retries as throttling, which include
// ProvisionedThroughputExceededException).
func IsThrottle(err error) bool { return capacity.IsThrottle(err) }

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

// itemSize approximates DynamoDB's item size (see capacity.ItemSize).
func itemSize(item map[string]types.AttributeValue) int { return capacity.ItemSize(item) }
