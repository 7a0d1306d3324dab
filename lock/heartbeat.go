package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The heartbeat: a held lease renews itself every heartbeat interval with a write fenced on owner
// and token and conditioned on the version it last knew landed, settles a renew whose answer was
// lost by a consistent re-read, and cancels its context at its local expiry whatever is in flight
// (see the package documentation, "Guarantees").

type renewResult struct {
	outcome   string // "ok", "settled" (a renew of ours found landed: the item's version and expiry), "unknown", "lost", "aborted"
	version   int64
	expiresAt time.Time
	err       error
}

// heartbeat renews the lease every heartbeat interval and cancels its context at the local expiry.
// It waits on one clock timer at a time (re-armed early when a renew adopts an earlier expiry), and
// a renew runs on its own goroutine so that a renew stuck on a dead connection can never delay the
// local expiry.
func (l *Lease) heartbeat(sent time.Time) {
	defer close(l.hbDone)
	c := l.c
	nextRenew := sent.Add(c.heartbeat)
	var results chan renewResult // nil while no renew is in flight
	var callCancel context.CancelFunc = func() {}
	defer func() {
		callCancel()
		if results != nil {
			<-results
		}
	}()
	timerAt := earliest(nextRenew, l.localExpiry())
	timer := c.clock.After(timerAt.Sub(c.clock.Now()))
	for {
		select {
		case <-l.stop:
			return
		case <-l.ctx.Done():
			return // a fenced write found the lease lost
		case r := <-results:
			results = nil
			callCancel()
			if l.apply(r) {
				return
			}
			if exp := l.localExpiry(); exp.Before(timerAt) {
				// An adopted expiry (see renew) came before the pending wake-up.
				timerAt = exp
				timer = c.clock.After(exp.Sub(c.clock.Now()))
			}
		case <-timer:
			now := c.clock.Now()
			if !now.Before(l.localExpiry()) {
				// Never renew a lease we already consider expired: someone may take it any moment.
				l.end(l.lost("expired by the holder's clock at %s", l.localExpiry().Format(time.RFC3339Nano)))
				c.log.Warn("lock: lease expired locally", "pk", l.pk, "slot", l.slot, "token", l.token)
				return
			}
			if !now.Before(nextRenew) {
				if results == nil {
					results, callCancel = l.startRenew(now)
				}
				nextRenew = now.Add(c.heartbeat)
			}
			timerAt = earliest(nextRenew, l.localExpiry())
			timer = c.clock.After(timerAt.Sub(now))
		}
	}
}

// startRenew runs one renew on its own goroutine; its result arrives on the returned channel.
func (l *Lease) startRenew(now time.Time) (chan renewResult, context.CancelFunc) {
	// Cancelling ctx (stop, or the lease ended) aborts both the write and the settling re-read.
	ctx, cancel := context.WithCancel(l.ctx)
	ch := make(chan renewResult, 1)
	known, exp := l.currentVersion(), now.Add(l.c.ttl)
	wait := l.renewTimeout(now)
	go func() { ch <- l.renew(ctx, known, exp, wait) }()
	return ch, cancel
}

// renewTimeout is how long (real time) a renew started at now may take: half the time left until
// the local expiry, and at least a heartbeat. A server that answers slowly (a loaded DynamoDB
// Local, throttling retries) still renews the lease instead of having every attempt cut off after
// one heartbeat, while a hung call leaves time for one more attempt; the local expiry ends the
// lease either way, whatever is in flight.
func (l *Lease) renewTimeout(now time.Time) time.Duration {
	return max(l.c.heartbeat, l.localExpiry().Sub(now)/2)
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// apply records a renew's result; it reports whether the lease is over.
func (l *Lease) apply(r renewResult) bool {
	if h := l.c.hooks.renewed; h != nil {
		defer h(l, r.outcome)
	}
	switch r.outcome {
	case "ok", "settled":
		l.mu.Lock()
		l.version, l.expiresAt = r.version, r.expiresAt
		l.mu.Unlock()
	case "lost":
		l.end(r.err)
		l.c.log.Warn("lock: lease lost", "pk", l.pk, "slot", l.slot, "token", l.token, "err", r.err)
		return true
	default:
		l.c.log.Warn("lock: renew failed, will retry", "pk", l.pk, "slot", l.slot, "token", l.token, "err", r.err)
	}
	return false
}

// renew writes a new expiry with the next version, fenced on owner and token and conditioned on
// known, the version of the last renewal we know landed. So every landed renew moves the version
// on (and with it what a contender's take is conditioned on), and a renew of unknown outcome can
// land only on the item as we know it: never after a later renew, where it would put back an
// earlier expiry than the one we believe in.
//
// When the item turns out to carry a later version of ours (an earlier renew whose answer was
// lost landed after all), the lease adopts that item's version and expiry, as those are what
// contenders see: a condition failure that returns it renews once more on top of it; an unknown
// outcome settled by a consistent re-read keeps it.
func (l *Lease) renew(ctx context.Context, known int64, exp time.Time, wait time.Duration) renewResult {
	// A hung call gives up after wait (real time, see renewTimeout), so a later heartbeat can
	// try again; the local expiry does not wait for it either way.
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var adopted renewResult
	for range 2 {
		err := l.sendRenew(wctx, known, exp)
		if err == nil {
			return renewResult{outcome: "ok", version: known + 1, expiresAt: exp}
		}
		if _, ok := conditionFailed(err); !ok {
			return orAdopted(l.settleRenew(ctx, known, err, wait), adopted)
		}
		cur, rerr := l.conditionFailedItem(wctx, err)
		switch {
		case rerr != nil:
			return orAdopted(renewResult{outcome: "unknown", err: errors.Join(err, rerr)}, adopted)
		case !l.ours(cur):
			return renewResult{outcome: "lost", err: l.lost("renew found owner %q token %d released %t", cur.owner, cur.token, cur.released)}
		case cur.version <= known:
			return orAdopted(renewResult{outcome: "unknown", err: fmt.Errorf("lock: renew refused on version %d, ours: %w", cur.version, err)}, adopted)
		}
		adopted = renewResult{outcome: "settled", version: cur.version, expiresAt: cur.expiresAt}
		if !cur.expiresAt.Before(exp) {
			break // our own write, whose first answer was lost to the SDK's retry
		}
		known = cur.version
	}
	return adopted
}

// orAdopted is r, or adopted (when set) in place of an unknown outcome: a renew that found an
// earlier renew of ours landed keeps what it learned when its second write's outcome is unknown.
func orAdopted(r, adopted renewResult) renewResult {
	if r.outcome == "unknown" && adopted.outcome != "" {
		return adopted
	}
	return r
}

// sendRenew is the renew's write: the new expiry and version known+1, on the item as we know it.
func (l *Lease) sendRenew(ctx context.Context, known int64, exp time.Time) error {
	c := l.c
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.table),
		Key:                                 key(l.pk, l.slot),
		UpdateExpression:                    aws.String("SET #exp = :exp, #version = :version"),
		ConditionExpression:                 aws.String(fencedCondition + " AND #version = :known"),
		ExpressionAttributeNames:            fencedNames(map[string]string{"#exp": attrExpiresAt, "#version": attrVersion}),
		ExpressionAttributeValues:           l.fencedValues(map[string]types.AttributeValue{":exp": avT(exp), ":version": avN(known + 1), ":known": avN(known)}),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// conditionFailedItem is the item that failed a renew's condition: the one DynamoDB returned with
// the failure, else (the item is gone, or the service left it out) a consistent re-read.
func (l *Lease) conditionFailedItem(ctx context.Context, err error) (slotItem, error) {
	cf, _ := conditionFailed(err)
	if cur := decodeSlot(cf.Item); cur.exists {
		return cur, nil
	}
	return l.c.readSlot(ctx, l.pk, l.slot)
}

// ours reports whether cur is still this lease's item (writes are fenced on owner and token, so
// every version past the acquisition's on it is one of our renewals).
func (l *Lease) ours(cur slotItem) bool {
	return cur.exists && cur.owner == l.c.owner && cur.token == l.token && !cur.released
}

// settleRenew decides a renew whose outcome is unknown (timeout, transport) by a consistent
// re-read: a version of ours past known means a renew of ours landed (this one or an earlier one
// whose answer was lost), and the item's expiry is the one the lease now has.
func (l *Lease) settleRenew(ctx context.Context, known int64, err error, wait time.Duration) renewResult {
	if ctx.Err() != nil {
		return renewResult{outcome: "aborted", err: err}
	}
	rctx, rcancel := context.WithTimeout(ctx, wait)
	defer rcancel()
	cur, rerr := l.c.readSlot(rctx, l.pk, l.slot)
	switch {
	case rerr != nil:
		return renewResult{outcome: "unknown", err: errors.Join(err, rerr)}
	case !l.ours(cur):
		return renewResult{outcome: "lost", err: l.lost("renew failed (%v) and the item shows owner %q token %d released %t", err, cur.owner, cur.token, cur.released)}
	case cur.version > known:
		return renewResult{outcome: "settled", version: cur.version, expiresAt: cur.expiresAt}
	default:
		return renewResult{outcome: "unknown", err: err}
	}
}
