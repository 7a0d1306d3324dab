package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/capacity"
)

// WriteGate is what every ledger write of a Worker passes through (claims, completions, retries,
// dead letters, releases, leaving the pending index; lease heartbeats and checkpoints are lock's
// and do not): it counts the write attempts DynamoDB throttled and, with Config.WriteRate, holds
// the writes to that many WCU per second. Each write waits for its estimated cost in a
// capacity.Bucket (the read limiter's) and is settled on the ConsumedCapacity it reports; a
// throttle halves the allowed rate, which then climbs back to WriteRate (capacity.AIMD). A nil
// gate (a ledger used on its own) counts and limits nothing.
type WriteGate struct {
	bucket    *capacity.Bucket // nil: unlimited
	aimd      *capacity.AIMD
	throttles atomic.Int64
}

// tokensPerWCU: writes are charged in whole units (a transactional write in two).
const tokensPerWCU = 1

func NewWriteGate(wcu float64) *WriteGate {
	g := &WriteGate{}
	if wcu > 0 {
		g.bucket = capacity.NewBucket(wcu, tokensPerWCU)
		g.aimd = capacity.NewAIMD(wcu)
	}
	return g
}

// before waits until the bucket holds a write's estimated WCU; taken is for after. The wait ends
// early when ctx or its admission (WithAdmission) ends: the write is then not sent.
func (g *WriteGate) before(ctx context.Context, estimate float64) (taken int, err error) {
	if !g.holdsRate() {
		return 0, nil
	}
	if r, changed := g.aimd.Rate(time.Now()); changed {
		g.bucket.SetRate(r)
	}
	if unqueued(ctx) {
		return g.bucket.Charge(estimate), nil
	}
	a := admissionOf(ctx)
	if a == nil {
		taken, err = g.bucket.Wait(ctx, estimate)
		return taken, gateNotSent(err)
	}
	if a.Err() != nil {
		return 0, fmt.Errorf("%w: %w", errNotAdmitted, context.Cause(a))
	}
	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(a, func() { cancel(context.Cause(a)) })
	defer func() { stop(); cancel(nil) }()
	taken, err = g.bucket.Wait(wctx, estimate)
	if err != nil && a.Err() != nil {
		err = fmt.Errorf("%w: %w", errNotAdmitted, context.Cause(a))
	}
	return taken, gateNotSent(err)
}

// ErrNotSent: a write was not sent, the context it waited for write capacity under
// (Config.WriteRate) having ended first: nothing of it was applied, and it may be made again
// later. A worker gives the item's claim back without counting an attempt.
var ErrNotSent = errors.New("dynapart: not written: its wait for write capacity (the write rate) ended first")

// errNotAdmitted: a write was not sent, its admission (WithAdmission) having ended while it
// waited for the write gate. Nothing of it was applied (refused).
var errNotAdmitted = fmt.Errorf("%w: stopped", ErrNotSent)

// sentBefore is err, an ErrNotSent of a round sent again after an earlier round of the same writes
// whose outcome is not known (it may have landed): no longer an ErrNotSent, so that callers settle
// it by a read instead of taking it for nothing applied.
func sentBefore(err error) error {
	if !errors.Is(err, ErrNotSent) {
		return err
	}
	return fmt.Errorf("sent again after a round of unknown outcome, then not sent: %s: %w", err.Error(), errRoundNotSent)
}

// errRoundNotSent: a later round of a write was not sent; an earlier one may have landed.
var errRoundNotSent = errors.New("outcome of an earlier round unknown")

// gateNotSent is the error of a wait for the write gate that ended before the write was sent (err
// from the bucket, or errNotAdmitted): an ErrNotSent.
func gateNotSent(err error) error {
	if err == nil || errors.Is(err, ErrNotSent) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotSent, err)
}

// after counts a write's throttled attempts (backing off when there were any) and settles it on
// the capacity it consumed; a write that reported none (an error) stays charged its estimate.
func (g *WriteGate) after(taken int, consumed float64, reported bool, throttled int64) {
	if g == nil {
		return
	}
	if throttled > 0 {
		g.throttles.Add(throttled)
		if g.aimd != nil {
			if r, changed := g.aimd.Throttled(time.Now()); changed {
				g.bucket.SetRate(r)
			}
		}
	}
	if g.bucket != nil && reported {
		g.bucket.Settle(taken, consumed)
	}
}

// throttled is the number of throttled write attempts counted.
func (g *WriteGate) Throttled() int64 {
	if g == nil {
		return 0
	}
	return g.throttles.Load()
}

// allowed is the rate the gate allows now (WCU/s), 0 when unlimited.
func (g *WriteGate) Allowed() float64 {
	if g == nil || g.aimd == nil {
		return 0
	}
	return g.aimd.Current()
}

// option counts the throttled attempts of one call into n (nil when the gate counts nothing).
func (g *WriteGate) option(n *atomic.Int64) []func(*dynamodb.Options) {
	if g == nil {
		return nil
	}
	return []func(*dynamodb.Options){capacity.CountThrottles(n)}
}

// throttledAttempts is the attempts of one call DynamoDB throttled: those the SDK retried (seen
// by its middleware) or, when it saw none, 1 for a call that ended throttled (a client that is not
// the SDK's, or a transaction cancelled for throttling).
func throttledAttempts(seen int64, err error) int64 {
	if seen > 0 {
		return seen
	}
	if err == nil {
		return 0
	}
	var tce *types.TransactionCanceledException
	if capacity.IsThrottle(err) {
		return 1
	}
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if capacity.IsThrottleReason(aws.ToString(r.Code)) {
				return 1
			}
		}
	}
	return 0
}

// updateItem sends one UpdateItem of the ledger through its write gate.
func (l *core) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	taken, err := l.gate.before(ctx, writeEstimate(in.Key, in.ExpressionAttributeValues))
	if err != nil {
		return nil, err
	}
	var seen atomic.Int64
	m := &l.meter
	if aws.ToString(in.TableName) != l.row.table { // items of another size than the rows
		m = &l.srcMeter
	}
	in.ReturnConsumedCapacity = m.ask(l.gate.holdsRate())
	out, err := l.db.UpdateItem(ctx, in, l.gate.option(&seen)...)
	var c []types.ConsumedCapacity
	if err == nil && out.ConsumedCapacity != nil {
		c = []types.ConsumedCapacity{*out.ConsumedCapacity}
	}
	m.settle(billed(1, err), c)
	l.gate.after(taken, max(sumWCU(c), 1), c != nil, throttledAttempts(seen.Load(), err))
	return out, err
}

// transactItems sends one TransactWriteItems of the ledger through its write gate: twice the
// estimate of its updates, as DynamoDB charges a transactional write, settled on what it reports
// but no less than 2 WCU per item.
func (l *core) transactItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
	var estimate float64
	for _, it := range in.TransactItems {
		estimate += 2 * txItemEstimate(it)
	}
	taken, err := l.gate.before(ctx, estimate)
	if err != nil {
		return nil, err
	}
	var seen atomic.Int64
	floor := 2 * float64(len(in.TransactItems)) // DynamoDB's least charge; DynamoDB Local reports 2 in all
	// Set by an earlier send of in, it is kept: a repeat is the same request (see commitTx).
	if in.ReturnConsumedCapacity == "" {
		in.ReturnConsumedCapacity = l.txMeter.ask(l.gate.holdsRate())
	}
	out, err := l.db.TransactWriteItems(ctx, in, l.gate.option(&seen)...)
	var c []types.ConsumedCapacity
	if err == nil && len(out.ConsumedCapacity) > 0 {
		c = out.ConsumedCapacity
	}
	l.txMeter.settle(billed(floor, err), c)
	consumed := max(sumWCU(c), floor)
	l.gate.after(taken, consumed, len(c) > 0, throttledAttempts(seen.Load(), err))
	return out, err
}

// txItemEstimate is the WCU one write of a transaction is expected to cost outside it (a put: its
// item's size; an update: its key and values; a delete or a condition check: 1).
func txItemEstimate(it types.TransactWriteItem) float64 {
	switch {
	case it.Update != nil:
		return writeEstimate(it.Update.Key, it.Update.ExpressionAttributeValues)
	case it.Put != nil:
		return writeEstimate(it.Put.Item, it.Put.ExpressionAttributeValues)
	}
	return 1
}

// writeEstimate is the WCU an update is expected to cost before DynamoDB says: 1 per KB of its
// key and values, at least 1. An item larger than its update costs more; the settlement charges
// the difference.
func writeEstimate(key Key, vals map[string]types.AttributeValue) float64 {
	return max(1, math.Ceil(float64(capacity.ItemSize(key)+capacity.ItemSize(vals))/1024))
}

// holdsRate reports whether g holds a write rate (then every write is settled on its reported cost).
func (g *WriteGate) holdsRate() bool { return g != nil && g.bucket != nil }
