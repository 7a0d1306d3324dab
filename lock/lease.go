package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Lease is one held slot (or mutex). Its Context is cancelled as soon as the lease may no longer be
// ours; every write through it is fenced on owner and token. Release it when done.
type Lease struct {
	c          *Client
	pk         string
	group      string
	slot       int
	token      int64
	acquiredAt time.Time
	tookOver   bool
	checkpoint string
	epoch      int64
	// afterTake: the meta item as the acquisition wrote or found it after the take (recordMeta).
	afterTake *metaItem

	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed to stop the heartbeat
	hbDone chan struct{} // closed when the heartbeat goroutine has returned

	mu        sync.Mutex
	version   int64
	expiresAt time.Time
	endedAt   time.Time // by the holder's clock, when ctx was cancelled

	relMu   sync.Mutex
	relDone bool
	relErr  error
	// relFinish: FinishAndRelease's checkpoint, which Release writes with the finished flag.
	relFinish *string
	stopOnce  sync.Once
}

func (c *Client) newLease(t target, before, got slotItem, now time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{
		c: c, pk: t.pk, group: t.name, slot: got.sk, token: got.token,
		acquiredAt: c.clock.Now(),
		tookOver:   before.exists && before.owner != "" && !before.released,
		checkpoint: got.checkpoint,
		epoch:      got.epoch,
		ctx:        ctx, cancel: cancel,
		stop: make(chan struct{}), hbDone: make(chan struct{}),
		version: got.version, expiresAt: got.expiresAt,
	}
	go l.heartbeat(now)
	return l
}

// Group returns the group name (the mutex name for a mutex lease).
func (l *Lease) Group() string { return l.group }

// Slot returns the slot number (0 for a mutex).
func (l *Lease) Slot() int { return l.slot }

// Token returns the fencing token: it grows by one on every acquisition of the slot, so a larger
// token always means a later holder.
func (l *Lease) Token() int64 { return l.token }

// Epoch returns the plan epoch the slot was acquired under: the group's meta epoch as read in the
// round that took it (0 for a group never resized, and for a mutex). It is recorded on the slot
// item; once the group's epoch is larger (a ResizeGroup since), the holder is on an old plan, and
// a MarkFinished of its no longer counts (the slot is finished only under the current epoch).
func (l *Lease) Epoch() int64 { return l.epoch }

// GroupAfterTake returns the group's meta item as the acquisition wrote or found it after taking
// the slot: the first holder of a new group creates the meta item once it has won its slot. It
// stands for a GroupState read made just after the take, which a holder needs to know that the
// plan it took the slot under is still the group's. ok is false when the acquisition read the
// meta item only before its take (the group existed): read GroupState then.
func (l *Lease) GroupAfterTake() (st GroupState, ok bool) {
	if l.afterTake == nil {
		return GroupState{}, false
	}
	return l.afterTake.state(), true
}

// Owner returns the owner id of the client that holds the lease.
func (l *Lease) Owner() string { return l.c.owner }

// Context is cancelled when the lease is lost (a renew or fenced write found another holder), when
// the holder's clock passes ExpiresAt minus the safety margin, or on Release. context.Cause says
// which: an error wrapping ErrLeaseLost, or ErrReleased.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lease is held, else the cause of the cancellation.
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Checkpoint returns the checkpoint stored on the slot when this lease was acquired ("" if none):
// where the previous holder got to.
func (l *Lease) Checkpoint() string { return l.checkpoint }

// ExpiresAt returns the expiry last written by this holder (by its clock).
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// AcquiredAt returns when the acquisition write succeeded, by the client's clock.
func (l *Lease) AcquiredAt() time.Time { return l.acquiredAt }

// TookOver reports whether the slot was taken from a holder that had not released it (it crashed
// or lost its connection), so work it had in flight may need recovering.
func (l *Lease) TookOver() bool { return l.tookOver }

// currentVersion is the version of the last renewal that landed.
func (l *Lease) currentVersion() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.version
}

// end cancels the lease context once, remembering when (for the tests' history checks).
func (l *Lease) end(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return
	}
	l.endedAt = l.c.clock.Now()
	l.cancel(cause)
}

func (l *Lease) lost(format string, args ...any) error {
	return fmt.Errorf("%w: %s slot %d token %d: %s", ErrLeaseLost, l.group, l.slot, l.token, fmt.Sprintf(format, args...))
}

func (l *Lease) localExpiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt.Add(-l.c.margin)
}

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

const fencedCondition = "#owner = :me AND #token = :myToken AND #rel = :false"

func fencedNames(m map[string]string) map[string]string {
	m["#owner"], m["#token"], m["#rel"] = attrOwner, attrToken, attrReleased
	return m
}

func (l *Lease) fencedValues(m map[string]types.AttributeValue) map[string]types.AttributeValue {
	m[":me"], m[":myToken"], m[":false"] = avS(l.c.owner), avN(l.token), avB(false)
	return m
}

// fencedWrite applies update to the lease's item only while it is still ours (owner, token, not
// released). A lease whose context is done (lost, expired by the holder's clock, released) writes
// nothing: it returns an error wrapping ErrLeaseLost without a request, since the slot may belong
// to someone else by now. A failed condition means we lost it: the context is cancelled and
// ErrLeaseLost returned; the item is unchanged.
func (l *Lease) fencedWrite(ctx context.Context, what, update string, names map[string]string, values map[string]types.AttributeValue) error {
	if err := l.ended(what); err != nil {
		return err
	}
	_, err := l.c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(l.c.table),
		Key:                                 key(l.pk, l.slot),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(fencedCondition),
		ExpressionAttributeNames:            fencedNames(names),
		ExpressionAttributeValues:           l.fencedValues(values),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	if cf, ok := conditionFailed(err); ok {
		cur := decodeSlot(cf.Item)
		lerr := l.lost("%s found owner %q token %d released %t", what, cur.owner, cur.token, cur.released)
		l.end(lerr)
		return lerr
	}
	return fmt.Errorf("lock: %s %s slot %d: %w", what, l.group, l.slot, l.c.tableErr(err))
}

// ended is nil while the lease may still write; once it is released, lost or expired by the
// holder's clock, it is the error (wrapping ErrLeaseLost) of a write what refused without a request.
func (l *Lease) ended(what string) error {
	if l.released() {
		return fmt.Errorf("lock: %s: %w (%w)", what, ErrLeaseLost, ErrReleased)
	}
	if l.ctx.Err() != nil {
		return l.endedErr(what)
	}
	return nil
}

// endedErr is the error of a write refused because the lease's context is done: its cause, which
// wraps ErrLeaseLost (or is ErrReleased, then wrapped in ErrLeaseLost too).
func (l *Lease) endedErr(what string) error {
	cause := context.Cause(l.ctx)
	if errors.Is(cause, ErrLeaseLost) {
		return fmt.Errorf("lock: %s: %w", what, cause)
	}
	return fmt.Errorf("lock: %s: %w (%w)", what, ErrLeaseLost, cause)
}

func (l *Lease) released() bool {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	return l.relDone
}

// SaveCheckpoint stores value on the slot, fenced on owner and token: a stale holder gets
// ErrLeaseLost and changes nothing. The next holder of the slot sees it as Checkpoint().
func (l *Lease) SaveCheckpoint(ctx context.Context, value string) error {
	return l.fencedWrite(ctx, "save checkpoint", "SET #cp = :cp",
		map[string]string{"#cp": attrCheckpoint}, map[string]types.AttributeValue{":cp": avS(value)})
}

// MarkFinished marks the slot's share done (fenced): the slot is not handed out again under the
// plan epoch the lease was acquired under ([Lease.Epoch]) until ResetGroup, and once every slot
// 0..n-1 is finished under the group's current epoch AcquireSlot returns ErrGroupFinished. A
// ResizeGroup re-opens every slot: a slot finished under an older epoch is free to take.
func (l *Lease) MarkFinished(ctx context.Context) error {
	return l.fencedWrite(ctx, "mark finished", "SET #fin = :true",
		map[string]string{"#fin": attrFinished}, map[string]types.AttributeValue{":true": avB(true)})
}

// FinishWithCheckpoint is MarkFinished that also stores value as the slot's checkpoint (as
// SaveCheckpoint does), in the same fenced write: the last checkpoint of a share and its end cost
// one round trip.
func (l *Lease) FinishWithCheckpoint(ctx context.Context, value string) error {
	return l.fencedWrite(ctx, "mark finished", "SET #cp = :cp, #fin = :true",
		map[string]string{"#cp": attrCheckpoint, "#fin": attrFinished},
		map[string]types.AttributeValue{":cp": avS(value), ":true": avB(true)})
}

// FinishAndRelease is MarkFinished, SaveCheckpoint(value) and Release in one write, for a holder
// that is done with the slot: one round trip where the three take three. A lease already lost or
// released writes nothing (an error wrapping ErrLeaseLost, as MarkFinished). After a transport
// error, a later Release (or FinishAndRelease, whose value is then ignored) sends the same write
// again, conditioned like Release on owner and token only: a takeover or reset since fails it.
func (l *Lease) FinishAndRelease(ctx context.Context, value string) error {
	l.relMu.Lock()
	if !l.relDone && l.ctx.Err() == nil {
		l.relFinish = &value
	}
	retry := !l.relDone && l.relFinish != nil // set now, or by a call whose write failed
	l.relMu.Unlock()
	if !retry {
		return l.endedErr("mark finished")
	}
	return l.Release(ctx)
}

// Release gives the slot back at once (released = true, fenced) so a standby can take it without
// waiting for expiry. It stops the heartbeat and waits for it, and cancels the context with
// ErrReleased before the write, so no work continues while the next holder starts. It is
// idempotent; it returns an error wrapping ErrLeaseLost when the lease had already been lost.
// After a transport error it may be called again.
func (l *Lease) Release(ctx context.Context) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.relDone {
		return l.relErr
	}
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.hbDone
	var wasLost error
	if l.ctx.Err() != nil && !errors.Is(context.Cause(l.ctx), ErrReleased) {
		wasLost = context.Cause(l.ctx)
	}
	if wasLost != nil {
		l.relFinish = nil // a lost lease finishes nothing
	}
	l.end(ErrReleased)
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(l.c.table),
		Key:                                 key(l.pk, l.slot),
		UpdateExpression:                    aws.String("SET #rel = :true"),
		ConditionExpression:                 aws.String("#owner = :me AND #token = :myToken"),
		ExpressionAttributeNames:            map[string]string{"#owner": attrOwner, "#token": attrToken, "#rel": attrReleased},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":me": avS(l.c.owner), ":myToken": avN(l.token), ":true": avB(true)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if cp := l.relFinish; cp != nil {
		in.UpdateExpression = aws.String("SET #rel = :true, #fin = :true, #cp = :cp")
		in.ExpressionAttributeNames["#fin"], in.ExpressionAttributeNames["#cp"] = attrFinished, attrCheckpoint
		in.ExpressionAttributeValues[":cp"] = avS(*cp)
	}
	_, err := l.c.db.UpdateItem(ctx, in)
	switch cf, ok := conditionFailed(err); {
	case err == nil:
		l.relErr = wasLost
	case ok:
		cur := decodeSlot(cf.Item)
		l.relErr = l.lost("release found owner %q token %d", cur.owner, cur.token)
	default:
		return fmt.Errorf("lock: release %s slot %d: %w", l.group, l.slot, l.c.tableErr(err))
	}
	l.relDone = true
	l.c.log.Info("lock: released", "pk", l.pk, "slot", l.slot, "token", l.token, "err", l.relErr)
	return l.relErr
}
