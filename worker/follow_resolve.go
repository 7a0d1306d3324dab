package worker

import (
	"context"
	"maps"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
)

// resolution is what the current item and its state say a candidate of the stream needs.
type resolution int

const (
	resolvedGone    resolution = iota + 1 // the item no longer exists: nothing to handle
	resolvedHandled                       // its current version is the one recorded as finished
	needsRenew                            // finished at an older version: reopen it (Renew)
	needsWait                             // claimed by a live claim, or a retry not yet due
	needsHandling                         // pending, a retry that is due, or an expired claim
)

// followOne resolves one candidate of the stream: from the item and its state it handles the
// current content as a pass would (claim, handler, completion recording the version), reopening
// first a finished item whose content changed since (Renew), until the item's current version is
// recorded as finished, the item is done by this worker's own write, or it is gone. Only then is
// the candidate acknowledged (its batch may be checkpointed). Stopped first, it is left
// unacknowledged: the shard's next reader reads its record again.
//
// The first look is the record's new image when it carries the state (the inline ledger, with
// claims): no read.
// The image may be stale; then the conditional writes refuse what it suggests, and every later
// look reads the item (consistent).
func (p *pass) followOne(t task) {
	c := p.w.cfg
	item, st, fromImage := p.imageState(t.item.Attrs)
	var tries followTries
	for round := 0; p.fetchCtx.Err() == nil; round++ {
		if !fromImage {
			var err error
			if item, st, err = p.currentItem(t.key); err != nil {
				p.stopOnReadRefusal(err) // refused for good: the pass stops, and with it this loop
				c.Logger.Warn("dynapart: read a changed item; trying again", "key", ledger.KeyText(t.key), "err", err)
				p.followWait(backoff(c.RetryBackoff, c.MaxRetryBackoff, round+1))
				continue
			}
		}
		fromImage = false
		if p.followStep(t, item, st, round, &tries) {
			t.item.Ack()
			return
		}
		if tries.renewed != nil {
			// Renewed from the state looked at: the item is a retry due now, its content as it
			// was; the claim that follows returns the content as of the claim. No read.
			st, fromImage, tries.renewed = *tries.renewed, true, nil
		}
	}
}

// followStep takes one step on a candidate whose item and state are as given; true when the
// candidate is resolved.
func (p *pass) followStep(t task, item map[string]types.AttributeValue, st ItemState, round int, tries *followTries) bool {
	c := p.w.cfg
	switch p.resolve(item, st) {
	case resolvedGone:
		p.w.stats.followDeleted.Add(1)
		return true
	case resolvedHandled:
		p.followResolved(tries.ran)
		return true
	case needsRenew:
		now := c.Clock.Now()
		id, err := p.renew(t.key, st, now)
		ok := id != ""
		if ok {
			renewed := p.renewedState(st, now, id)
			tries.renewed = &renewed
			if st.Status == StatusDone {
				tries.reopenedDone = st.Version
			}
		}
		if ledger.IsValidation(err) {
			// Refused for good (the reopened state would pass 400 KB): no retry can help, and
			// retrying would hold up the shard's every later record.
			p.countUnprocessable(t.key, err)
			return true
		}
		if err != nil {
			p.stopOnRefusal(err) // refused for good: the pass stops, and with it this loop
			c.Logger.Warn("dynapart: renew a changed item; trying again", "key", ledger.KeyText(t.key), "err", err)
		}
		if err != nil || !ok && round > 0 {
			// Refused again and again: another worker keeps writing it; not in a tight loop.
			p.followWait(backoff(c.RetryBackoff, c.MaxRetryBackoff, round+1))
		}
	case needsWait:
		p.followWait(st.Due().Sub(c.Clock.Now()))
	case needsHandling:
		if tries.processed {
			// Tried here and not finished (a retry, a lost claim): not in a tight loop.
			p.followWait(backoff(c.RetryBackoff, c.MaxRetryBackoff, round))
		}
		var finished, ran atomic.Bool
		accounted := make(chan struct{}) // closed when process (or the completer) acknowledges it
		p.process(task{item: scan.NewItem(item, func() { close(accounted) }), key: t.key, fresh: st.Status == StatusPending, seen: st.Claim,
			attempt: st.Attempts + 1, finished: &finished, ran: &ran, reopenedDone: tries.reopenedDone})
		tries.reopenedDone = "" // for the claim right after the renew only
		if ran.Load() {
			// With BatchClaims the completer writes the completion after process returns: its
			// outcome decides. Looked at before it, the item shows this very claim, which, once
			// expired (a slow or queued completion), would be claimed again and its version
			// handled a second time, again and again until MaxAttempts. Every other way out of
			// process has acknowledged the item already, or the pass stops.
			select {
			case <-accounted:
			case <-p.fetchCtx.Done():
			}
		}
		tries.processed, tries.ran = true, tries.ran || ran.Load()
		if finished.Load() {
			// Done by this worker's write (or unprocessable): the version handled is recorded (a
			// newer one, if the item changed meanwhile, has a record of its own after this one).
			p.followResolved(tries.ran)
			return true
		}
	}
	return false
}

// imageState is a record's new image with the state it carries: ok for the inline ledger only,
// and not in complete-only mode, whose handler runs before its write: a stale image would run it
// for a version handled already (the read costs less than a handler run).
func (p *pass) imageState(image map[string]types.AttributeValue) (map[string]types.AttributeValue, ItemState, bool) {
	if image == nil || p.w.cfg.CompleteOnly {
		return nil, ItemState{}, false
	}
	st, ok := p.e.ledger.StateOf(image)
	return image, st, ok
}

// followTries is what a candidate's resolution did so far: processed it (a claim or a
// complete-only attempt was made), ran its handler; renewed, when its last step renewed it, is
// the state that left.
type followTries struct {
	processed, ran bool
	renewed        *ItemState
	reopenedDone   string // the version of the done state the last renew reopened (task.reopenedDone)
}

// resolve says what item (nil: gone) in state st needs.
func (p *pass) resolve(item map[string]types.AttributeValue, st ItemState) resolution {
	now := p.w.cfg.Clock.Now()
	switch {
	case item == nil:
		return resolvedGone
	case st.Status.Finished() && (st.Version == p.contentVersion(item) || st.Claim == ""):
		// A finished state without a claim id was set by hand (README: how to mark an item
		// done): no renew could name it, and it counts as handled.
		return resolvedHandled
	case st.Status.Finished():
		return needsRenew
	case st.Due().After(now) && !p.takesOver(st):
		return needsWait
	}
	return needsHandling
}

// takesOver reports a live claim the slot's lease takes over at once (an older token of the same
// slot and scope), as a claim's condition does.
func (p *pass) takesOver(st ItemState) bool {
	return st.Status == StatusClaimed && st.Slot == p.lease.Slot() && st.Token < p.lease.Token() && st.Scope == p.w.scope
}

// renew reopens a finished item whose content changed since (ledger.Renew on the state read); it
// returns the reopened state's claim id, "" when the renew was refused.
func (p *pass) renew(key Key, st ItemState, now time.Time) (string, error) {
	wctx, cancel := p.writeContext()
	defer cancel()
	return p.e.ledger.Renew(wctx, key, st.Claim, now)
}

// followResolved counts a resolved candidate: a version handled here, or found handled already
// (by the pass, or by a reader before a takeover), which a newer record of the item superseded or
// which needed nothing.
func (p *pass) followResolved(handledHere bool) {
	if handledHere {
		p.w.stats.followHandled.Add(1)
		return
	}
	p.w.stats.followSuperseded.Add(1)
}

// currentItem reads an item (consistent) and its state: nil when it no longer exists. The table
// ledger's row is read before the item, so the content is never older than the state it is
// judged by (a state newer than the content read would renew a version handled meanwhile).
func (p *pass) currentItem(key Key) (map[string]types.AttributeValue, ItemState, error) {
	ctx, cancel := context.WithTimeout(p.fetchCtx, p.w.cfg.WriteTimeout)
	defer cancel()
	var st ItemState
	_, onItem := p.e.ledger.StateOf(nil)
	if !onItem {
		var err error
		if st, err = p.e.ledger.State(ctx, key); err != nil {
			return nil, st, err
		}
	}
	item, err := p.readItem(ctx, key)
	if err != nil || item == nil {
		return nil, ItemState{}, err
	}
	if onItem {
		st, _ = p.e.ledger.StateOf(item)
	}
	return item, st, nil
}

// readItem reads an item of the source table (consistent); nil when it does not exist.
func (p *pass) readItem(ctx context.Context, key Key) (map[string]types.AttributeValue, error) {
	c := p.w.cfg
	out, err := c.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(c.Table), Key: key, ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return nil, err
	}
	if cc := out.ConsumedCapacity; cc != nil {
		p.w.addItemRCU(aws.ToFloat64(cc.CapacityUnits))
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// followWait waits d (at least a millisecond, at most StreamPoll) unless the pass stops.
func (p *pass) followWait(d time.Duration) {
	d = min(max(d, time.Millisecond), p.w.cfg.StreamPoll)
	select {
	case <-p.fetchCtx.Done():
	case <-p.w.cfg.Clock.After(d):
	}
}

// versionOf is the version a claim or complete-only write of attrs records: their content, after
// eff's changes of the item itself ("" unless the worker follows the stream).
func (p *pass) versionOf(attrs map[string]types.AttributeValue, eff *ledger.Effects) string {
	if !p.w.cfg.Versions {
		return ""
	}
	return p.contentVersion(eff.AppliedTo(attrs))
}

// contentVersion is the version of an item's content as the worker judges it: every attribute
// but the ledger's and the pending index's shard attribute (dynapart's bookkeeping, removed from
// a finished item in index mode).
func (p *pass) contentVersion(item map[string]types.AttributeValue) string {
	if _, ok := item[p.w.cfg.ShardAttr]; ok {
		item = maps.Clone(item)
		delete(item, p.w.cfg.ShardAttr)
	}
	return p.e.ledger.ContentVersion(item)
}

// renewIfChanged reopens, in a pass of a worker that follows the stream, a finished item whose
// content changed since the version its finishing write recorded (a change the stream brought
// while the pass ran, or one the stream lost, see followStream), and returns its state after. An
// item finished without a version (by a job that recorded none: which content it handled is not
// known) or without a claim id (set by hand) is left to the stream: a record of a change of it
// has it handled again, at least once, never skipped. The state returned is the stored one
// (renewedState): due at now less MaxClockSkew, so that every worker finds it due at once. When
// the state was read again (a refused renew), current is the item read after it: the content to
// handle, newer than attrs (nil otherwise).
func (p *pass) renewIfChanged(key Key, attrs map[string]types.AttributeValue, st ItemState, now time.Time) (_ ItemState, current map[string]types.AttributeValue) {
	if !p.w.cfg.Follow || !st.Status.Finished() || st.Claim == "" || st.Version == "" || st.Version == p.contentVersion(attrs) {
		return st, nil
	}
	id, err := p.renew(key, st, now)
	switch {
	case ledger.IsValidation(err):
		p.countUnprocessable(key, err) // refused for good: another pass would be refused again
		return st, nil
	case err != nil:
		// Landed with its answer lost (its own record is no new version): the inline ledger's
		// caller skips the finished state it is given, so another pass judges the item.
		p.again(now.Add(p.w.cfg.RetryBackoff))
		return st, nil
	case id == "":
		return p.afterRefusedRenew(key, st, now)
	}
	return p.renewedState(st, now, id), nil
}

// renewedState is the state a renew at now, whose claim id is id, wrote over the finished state
// st (ledger.Renew): a retry of st's version, due at now less MaxClockSkew, as the row stores it.
func (p *pass) renewedState(st ItemState, now time.Time, id string) ItemState {
	return ItemState{Status: StatusRetry, RetryAt: now.Add(-p.w.cfg.MaxClockSkew), Version: st.Version, Claim: id}
}

// afterRefusedRenew judges an item whose renew was refused, its state having moved since the scan
// (handled, or renewed by another worker, which may have stopped before claiming it), by its state
// read now: an unfinished state is for the claim (or the complete-only check) to decide, and a
// state finished at the item's current content is skipped. A read that fails, or a state finished
// at another version, asks for another pass. An unfinished state comes with the item read after
// it: the content to handle (the scanned one may be a version handled since).
func (p *pass) afterRefusedRenew(key Key, st ItemState, now time.Time) (ItemState, map[string]types.AttributeValue) {
	item, cur, err := p.currentItem(key)
	switch {
	case err == nil && item == nil:
		return st, nil // deleted: nothing to handle
	case err == nil && (!cur.Status.Finished() || cur.Claim == "" || cur.Version == p.contentVersion(item)):
		return cur, item
	}
	p.again(now.Add(p.w.cfg.RetryBackoff))
	return st, nil
}

// renewChangedRows is renewIfChanged for the table ledger, whose state is not on the scanned
// items: in a rescan after the stream lost records (slot.rescan), the page's rows are read (100
// to a request) and every finished item whose content changed is reopened before its claim.
func (p *pass) renewChangedRows(ctx context.Context, page *scan.Page) error {
	if !p.rescan || len(page.Items) == 0 {
		return nil
	}
	if _, onItem := p.e.ledger.StateOf(page.Items[0].Attrs); onItem {
		return nil // the inline ledger's dispatch renews from the scanned state
	}
	items := make([]map[string]types.AttributeValue, len(page.Items))
	for i, it := range page.Items {
		items[i] = it.Attrs
	}
	states, err := p.e.ledger.States(ctx, items)
	if err != nil {
		return err
	}
	for i, it := range page.Items {
		st, key := states[i], keyOf(it.Attrs, p.e.keyAttrs)
		if !st.Status.Finished() || st.Version == p.contentVersion(it.Attrs) {
			continue
		}
		// The page was read before its rows: judge the state by content read after it.
		current, err := p.readItem(ctx, key)
		switch {
		case err != nil:
			// Not known whether it changed: the claim finds the row finished and would skip it.
			p.again(p.w.cfg.Clock.Now().Add(p.w.cfg.RetryBackoff))
		case current != nil:
			p.renewIfChanged(key, current, st, p.w.cfg.Clock.Now())
		}
	}
	return nil
}

// renewRefused is renewIfChanged for the table ledger's plain pass, which reads no rows before its
// claims (renewChangedRows does in a rescan only): a follower's claim (or complete-only check)
// that a row finished at another version than the scanned content refused reopens the item then,
// judged by the item read again, as the inline ledger's dispatch does from the scanned state. So a
// change no stream brings the group is handled: one made before the group's first pass, after an
// earlier group of the same job finished the item. ok when the item is open now (reopened, by this
// worker or another): its state st is for the caller to claim (or judge) in this pass.
func (p *pass) renewRefused(t task, found ItemState) (st ItemState, ok bool) {
	if !p.mayRenew(t, found) {
		return found, false
	}
	ctx, cancel := context.WithTimeout(p.fetchCtx, p.w.cfg.WriteTimeout)
	defer cancel()
	current, err := p.readItem(ctx, t.key)
	if err != nil {
		p.again(p.w.cfg.Clock.Now().Add(p.w.cfg.RetryBackoff)) // not known whether it changed
		return found, false
	}
	if current == nil {
		return found, false // deleted: nothing to handle
	}
	st, _ = p.renewIfChanged(t.key, current, found, p.w.cfg.Clock.Now())
	return st, st != found && !st.Status.Finished()
}

// mayRenew reports, without a request, whether renewRefused may reopen t's item found in state
// found: a table ledger's follower outside a rescan, the item finished (with a claim id and a
// version) at another version than its scanned content.
func (p *pass) mayRenew(t task, found ItemState) bool {
	_, onItem := p.e.ledger.StateOf(nil)
	return !onItem && !p.rescan && p.w.cfg.Follow && found.Status.Finished() && found.Claim != "" &&
		found.Version != "" && found.Version != p.contentVersion(t.item.Attrs)
}

// reopenRefused reopens, in a handler, an item whose claim in a batch a row finished at another
// version refused (t.refused): true when it is open now, for claimOne to claim; otherwise it is
// accounted for as the refusal says.
func (p *pass) reopenRefused(t *task) bool {
	found := *t.refused
	t.refused = nil
	if _, open := p.renewRefused(*t, found); !open {
		p.notNow(t.key, found, 0)
		t.item.Ack()
		return false
	}
	t.fresh, t.reopened = false, true
	return true
}

// markRan tells a follow candidate's resolver that the handler ran.
func (t task) markRan() {
	if t.ran != nil {
		t.ran.Store(true)
	}
}

// markFinished tells a follow candidate's resolver that its item moved to done.
func (t task) markFinished() {
	if t.finished != nil {
		t.finished.Store(true)
	}
}

// content is what t's handler gets: the item as of its claim when known, else as read.
func (t task) content() map[string]types.AttributeValue {
	if t.current != nil {
		return t.current
	}
	return t.item.Attrs
}

// contentAsClaimed gives a versioned worker's claimed item (Config.Versions: a follower, a stream
// handler, a back-fill beside them) the content it has now, as of the claim (the inline ledger's
// claim returns it; else a consistent read after the claim), and the claim the version of that
// content: a scan page or a record's image may be older than a version another worker handled or
// tried meanwhile (a follower that finished the item and reopened it for a newer version before
// this claim), and the handler must never run on content older than one handled or tried before
// it. false when the item is accounted for already (gone: the claim is given back; a failed read:
// given back, and tried again later; refused for good, the pass stops: stopOnReadRefusal).
func (p *pass) contentAsClaimed(wctx context.Context, t *task, claim *Claim) bool {
	if !p.w.cfg.Versions {
		return true
	}
	if t.current == nil {
		item, err := p.readItem(wctx, t.key)
		if err != nil || item == nil {
			p.interrupted(wctx, *t, *claim, 0)
			if err != nil {
				p.stopOnReadRefusal(err)
				p.w.cfg.Logger.Warn("dynapart: reading a claimed item failed; its claim is given back and the item tried again",
					"slot", claim.Slot, "err", err)
				p.again(p.w.cfg.Clock.Now().Add(p.w.cfg.RetryBackoff))
			}
			t.item.Ack()
			return false
		}
		t.current = item
	}
	claim.Version = p.versionOf(t.current, nil)
	return true
}
