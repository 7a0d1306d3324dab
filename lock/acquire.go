package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AcquireOption configures one AcquireSlot or TryAcquireSlot call.
type AcquireOption func(*acquireOpts)

type acquireOpts struct {
	meta, metaDefaults map[string]string
}

// WithGroupMeta records meta on the group's meta item (together with n) when the group is first
// used, and makes later callers with a different value fail with ErrGroupMismatch. Without it the
// meta values are not compared.
func WithGroupMeta(meta map[string]string) AcquireOption {
	return func(o *acquireOpts) {
		if meta == nil {
			meta = map[string]string{}
		}
		o.meta = meta
	}
}

// target is what an acquisition round competes for: slots 0..n-1 of a group, or a mutex (n = 1,
// no meta item).
type target struct {
	pk    string
	name  string
	n     int
	meta  map[string]string
	defs  map[string]string // meta defaults, see WithGroupMetaDefaults
	mutex bool
	sweep bool // read window after window until one has a free slot (groupReader)
	// join: the caller passed n = 0, "the group's current n": every round reads n from the meta
	// item (roundReader) and the group must exist.
	join bool
}

// maxLostRaces is how many conditional writes a round may lose before it gives up (see
// acquireRound).
const maxLostRaces = 2

// errTaken says a conditional acquisition write lost its race; the item it returns is the winner's.
var errTaken = errors.New("lock: slot taken by another contender")

// errRacesLost is the ErrNoFreeSlot of a round that saw free slots but lost the races for them.
var errRacesLost = fmt.Errorf("%w: lost the races for the free slots seen", ErrNoFreeSlot)

// round is what one acquireRound has seen so far.
type round struct {
	lostRaces int
	freeAt    time.Time // the earliest a held slot seen becomes free (freeFrom), on our clock (zero: none)
}

// heldUntil is the ErrNoFreeSlot (or errRacesLost) of a round that saw a held slot become free
// at freeAt by freeFrom's rule: a standby looks again just after it (untilFree) rather than at its
// next poll, so a takeover waits for the lease and MaxClockSkew, not for the poll as well.
type heldUntil struct {
	error
	freeAt time.Time
}

func (e *heldUntil) Unwrap() error { return e.error }

// noFreeSlot is the error of a round that took nothing.
func (rd *round) noFreeSlot() error {
	err := ErrNoFreeSlot
	if rd.lostRaces > 0 {
		err = errRacesLost
	}
	if rd.freeAt.IsZero() {
		return err
	}
	return &heldUntil{error: err, freeAt: rd.freeAt}
}

// AcquireSlot takes one free slot of group (slots 0..n-1), waiting as a hot standby while every
// slot is held: it polls (jittered, on the client's clock, and in a group of up to 64 slots just
// after a lease it saw runs out when that is sooner) and takes a slot as soon as it sees its
// holder release it or let it expire (a poll of a group of more than 64 slots reads 64 of them:
// see the package doc). It returns ErrGroupFinished once every slot is finished under the group's
// current plan epoch, a *GroupMismatchError when the group was set up with another n or meta, and
// ctx's error when ctx ends first.
//
// n = 0 joins the group at its current n, read from the meta item at every round (the first
// round right after ReadGroup takes it from that read), so a standby waiting across a
// ResizeGroup competes for the new slots; a group without a meta item gives an
// error wrapping ErrGroupNotFound at once (no wait). The lease records the plan epoch of the
// meta item read in the round that took the slot ([Lease.Epoch]).
func (c *Client) AcquireSlot(ctx context.Context, group string, n int, opts ...AcquireOption) (*Lease, error) {
	t, err := c.slotTarget(group, n, opts)
	if err != nil {
		return nil, err
	}
	return c.acquireWait(ctx, t)
}

// TryAcquireSlot makes one round of AcquireSlot (n = 0 joins at the current n, as there): it
// returns ErrNoFreeSlot instead of waiting when every unfinished slot is held. Under contention a round also ends with ErrNoFreeSlot after
// losing the race for two slots, as others are then taking the slots it saw free.
func (c *Client) TryAcquireSlot(ctx context.Context, group string, n int, opts ...AcquireOption) (*Lease, error) {
	t, err := c.slotTarget(group, n, opts)
	if err != nil {
		return nil, err
	}
	t.sweep = true // every window: ErrNoFreeSlot means no slot anywhere is free
	return c.acquireRound(ctx, t)
}

func (c *Client) slotTarget(group string, n int, opts []AcquireOption) (target, error) {
	var o acquireOpts
	for _, f := range opts {
		f(&o)
	}
	switch {
	case group == "":
		return target{}, bad("group", "must not be empty")
	case n < 0:
		return target{}, bad("n", "must be at least 1 (or 0: the group's current n), got %d", n)
	}
	return target{pk: groupPK(group), name: group, n: n, meta: o.meta, defs: o.metaDefaults, join: n == 0}, nil
}

// acquireWait is the hot standby: it polls until a slot is free. A standby must outlive an outage
// of DynamoDB (a restart, throttling beyond the SDK's retries, a dropped connection), so such
// errors are logged and retried with a growing pause; only errors that no retry can cure (a
// wrong group, a missing or wrongly keyed table, refused credentials) end the wait.
func (c *Client) acquireWait(ctx context.Context, t target) (*Lease, error) {
	failures := 0
	t.sweep = true // the first round looks at every window until it finds a free slot
	for {
		l, err := c.acquireRound(ctx, t)
		pause := c.jitter()
		// After a full sweep found nothing free, a poll reads one window; after a round that lost
		// the races for free slots, the next one sweeps again, and so does the round after one
		// that failed before its sweep was done.
		if errors.Is(err, ErrNoFreeSlot) {
			t.sweep = errors.Is(err, errRacesLost)
		}
		switch {
		case err == nil:
			return l, nil
		case errors.Is(err, ErrNoFreeSlot):
			failures = 0
			pause = c.untilFree(err, pause)
		case ctx.Err() != nil || !Retryable(err):
			return nil, err
		default:
			failures++
			pause = min(c.poll<<min(failures, 5), 30*time.Second)
			c.log.Warn("lock: looking for a free slot failed, retrying", "group", t.name, "err", err,
				"failures", failures, "retry_in", pause)
		}
		if err := c.wait(ctx, t.name, pause); err != nil {
			return nil, err
		}
	}
}

// acquireRound is one read of the group (the whole group up to windowSize slots, else a window of
// it and the meta item: nextView) followed by conditional writes on the slots it found free, in
// random order so that contenders starting together spread over the slots instead of all fighting
// for slot 0. A lost race returns the winner's item (ALL_OLD), which keeps the view fresh without
// another read; after maxLostRaces lost races the round gives up. A sweeping round whose window
// had no free slot left for it reads on to the next windows. The meta item is written only by a
// winner that found none, so a contender that loses pays no meta write: on a cold start of 64
// contenders for 32 slots the median contender makes 3 calls. A join (n = 0) reads the meta item
// first and never writes it (roundReader). A round whose view is ReadGroup's read and disagrees
// with the caller's n or meta is made again on a fresh read, as that read may be stale. The slot is taken under the plan epoch of the view's
// meta item, and a view whose slots are all finished under it ends the round with
// ErrGroupFinished only once a fresh read confirms the plan (confirmFinished).
func (c *Client) acquireRound(ctx context.Context, t target) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	asked := t
	r, err := c.roundReader(ctx, t)
	if err != nil {
		return nil, err
	}
	t = r.t // a join's n is the meta item's
	v, err := c.nextView(ctx, r)
	if err != nil {
		return nil, err
	}
	meta := v.meta
	if !t.mutex && meta.exists {
		if err := checkMeta(t, meta); err != nil {
			if r.prefetched {
				return c.acquireRound(ctx, asked) // ReadGroup's read may be stale: decide on a fresh one
			}
			return nil, err
		}
	}
	// won finishes an acquisition: the meta item is written only by a winner that found none.
	won := func(l *Lease) (*Lease, error) {
		if !t.mutex && !t.join && !meta.exists {
			after, err := c.recordMeta(ctx, t)
			if err != nil {
				// Never hand out a slot of a group we disagree with; give it straight back.
				_ = l.Release(context.WithoutCancel(ctx))
				return nil, err
			}
			l.afterTake = &after
		}
		c.log.Info("lock: acquired", "pk", t.pk, "slot", l.slot, "token", l.token, "took_over", l.tookOver)
		return l, nil
	}
	if l, err := c.adoptLanded(ctx, t, v, c.clock.Now()); err != nil {
		return nil, err
	} else if l != nil {
		return won(l)
	}
	var rd round
	for {
		l, err := c.takeFree(ctx, t, v, &rd)
		switch {
		case err != nil:
			return nil, err
		case l != nil:
			return won(l)
		case rd.lostRaces >= maxLostRaces || !r.more():
			return nil, rd.noFreeSlot()
		}
		if v, err = c.nextView(ctx, r); err != nil {
			return nil, err
		}
		if !t.mutex && v.meta.exists {
			if err := checkMeta(t, v.meta); err != nil { // a whole-group read after windows brings a fresh meta item
				return nil, err
			}
		}
	}
}

// takeFree tries the slots of v that are free, in random order, until it wins one or has lost
// maxLostRaces races in the round (counted in rd, which also keeps the earliest time a held slot
// of v becomes free). It returns no lease and no error when it found nothing to take, and
// ErrGroupFinished when v is the whole group and every slot of it is finished under the view's
// plan epoch, and still so by a fresh read of the meta item.
func (c *Client) takeFree(ctx context.Context, t target, v view, rd *round) (*Lease, error) {
	now := c.clock.Now()
	var free []int
	for s := v.lo; s < v.hi; s++ {
		it := v.slots[s]
		it.sk = s
		if it.finishedAt(v.meta.epoch) {
			continue
		}
		at := c.freeFrom(t.pk, it, now)
		switch {
		case !now.Before(at):
			free = append(free, s)
		case v.whole() && (rd.freeAt.IsZero() || at.Before(rd.freeAt)):
			rd.freeAt = at // (the next poll of a larger group reads the next window)
		}
	}
	mrand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	for _, s := range free {
		if rd.lostRaces >= maxLostRaces {
			// Others are taking the slots faster than our view ages: a fresh look after a
			// jittered wait is cheaper than chasing a stale view slot by slot (thundering herd).
			break
		}
		it := v.slots[s]
		it.sk = s
		l, cur, err := c.take(ctx, t, it, v.meta.epoch)
		if errors.Is(err, errTaken) {
			v.slots[s] = cur
			rd.lostRaces++
			continue
		}
		return l, err
	}
	if v.whole() && v.allFinished() {
		return nil, c.confirmFinished(ctx, t, v.meta)
	}
	return nil, nil
}

// isFree decides whether a contender may take the item now (see freeFrom).
func (c *Client) isFree(pk string, it slotItem, now time.Time) bool {
	return !now.Before(c.freeFrom(pk, it, now))
}

// freeFrom is the first time a contender may take the item, on our clock (zero: at once).
// Default rule: released, or once expires_at + MaxClockSkew has passed. Skew-immune rule:
// released, or once we have watched the same owner, token, version and expires_at for a full
// TTL on our own clock (a new observation starts the watch at now).
func (c *Client) freeFrom(pk string, it slotItem, now time.Time) time.Time {
	if !it.exists || it.released || it.owner == "" {
		return time.Time{}
	}
	if !c.skewImmune {
		return it.expiresAt.Add(c.skew).Add(time.Nanosecond) // strictly after
	}
	k := itemKey{pk, it.sk}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[itemKey]observation{}
	}
	obs, ok := c.seen[k]
	if !ok || obs.owner != it.owner || obs.token != it.token || obs.version != it.version || !obs.expiresAt.Equal(it.expiresAt) {
		obs = observation{owner: it.owner, token: it.token, version: it.version, expiresAt: it.expiresAt, since: now}
		c.seen[k] = obs
	}
	return obs.since.Add(c.ttl)
}

// untilFree shortens a standby's pause to just past the time a slot it saw held becomes free
// (heldUntil), spread over a tenth of the poll interval so that standbys watching the same slot
// do not all write at once; never shorter than a tenth of the poll interval.
func (c *Client) untilFree(err error, pause time.Duration) time.Duration {
	var h *heldUntil
	if !errors.As(err, &h) {
		return pause
	}
	d := h.freeAt.Sub(c.clock.Now()) + time.Millisecond + mrand.N(c.poll/10+1)
	return min(pause, max(d, c.poll/10))
}

// take makes the conditional write that acquires it under plan epoch: a Put that the item must not
// exist for, or an Update that requires the item to be unchanged (token, version, released) since
// we read it and not finished under epoch (a slot finished under an older plan is open again). The
// item records epoch and finished = false. It returns errTaken and the current item when another
// contender was faster.
//
// The write carries a nonce, fresh per call. When the write's own answer does not say that it
// landed, only an item carrying that nonce counts as ours. Owner, token and version cannot tell:
// every goroutine of one Client writes the same owner, and contenders that read the same item all
// aim at the same token and version, so the winner's item looks like ours to every loser (two
// holders). The nonce settles two cases:
//   - the outcome is unknown (timeout, reset connection): a consistent re-read shows whether our
//     write landed;
//   - the condition failed, but the failed write was the SDK's retry of our own write whose first
//     answer was lost: the item it found (ALL_OLD, else a re-read) carries our nonce, and the
//     slot is ours. Reporting errTaken there would leave a phantom lease, held by us and used by
//     nobody until it expires.
func (c *Client) take(ctx context.Context, t target, it slotItem, epoch int64) (*Lease, slotItem, error) {
	now := c.clock.Now()
	w := &takeWrite{t: t, before: it, owner: c.owner, token: it.token + 1, version: it.version + 1,
		nonce: rand.Text(), now: now, exp: now.Add(c.ttl), epoch: epoch}
	newItem, err := c.sendTake(ctx, w)
	if err != nil {
		return c.settleTake(ctx, w, err)
	}
	got := decodeSlot(newItem)
	got.sk = it.sk
	return c.newLease(t, it, got, now), slotItem{}, nil
}

// takeWrite is one acquisition write of take.
type takeWrite struct {
	t              target
	before         slotItem // the item as read, which the write replaces
	owner          string
	token, version int64
	nonce          string // fresh per write: 128 random bits
	now, exp       time.Time
	epoch          int64 // the plan epoch of the meta item the round read
}

// ours reports whether cur is the item this write made. It checks owner and token besides the
// nonce because a contender running an older version of this package takes a slot over without
// replacing the nonce.
func (w *takeWrite) ours(cur slotItem) bool {
	return cur.nonce == w.nonce && cur.owner == w.owner && cur.token == w.token && !cur.released
}

// sendTake sends the write: a Put that the item must not exist for, or an Update that requires
// the item unchanged since it was read (token, version, released) and not finished under w.epoch.
// It returns the item as written.
func (c *Client) sendTake(ctx context.Context, w *takeWrite) (map[string]types.AttributeValue, error) {
	it := w.before
	if !it.exists {
		item := key(w.t.pk, it.sk)
		item[attrOwner] = avS(w.owner)
		item[attrToken] = avN(w.token)
		item[attrVersion] = avN(w.version)
		item[attrExpiresAt] = avT(w.exp)
		item[attrAcquiredAt] = avT(w.now)
		item[attrReleased] = avB(false)
		item[attrNonce] = avS(w.nonce)
		item[attrEpoch] = avN(w.epoch)
		_, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           aws.String(c.table),
			Item:                                item,
			ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return item, err
	}
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.table),
		Key:       key(w.t.pk, it.sk),
		UpdateExpression: aws.String("SET #owner = :owner, #token = :token, #version = :version, " +
			"#exp = :exp, #acq = :acq, #rel = :false, #nonce = :nonce, #ep = :ep, #fin = :false"),
		ConditionExpression: aws.String("#token = :oldToken AND #version = :oldVersion AND #rel = :oldRel AND " +
			oldExpCondition(it) + " AND " + notFinishedCondition(w.epoch)),
		ExpressionAttributeNames: map[string]string{
			"#owner": attrOwner, "#token": attrToken, "#version": attrVersion, "#exp": attrExpiresAt,
			"#acq": attrAcquiredAt, "#rel": attrReleased, "#fin": attrFinished, "#nonce": attrNonce,
			"#ep": attrEpoch,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":owner": avS(w.owner), ":token": avN(w.token), ":version": avN(w.version), ":exp": avT(w.exp),
			":acq": avT(w.now), ":false": avB(false), ":oldToken": avN(it.token), ":oldVersion": avN(it.version),
			":oldRel": avB(it.released), ":nonce": avS(w.nonce), ":oldExp": avT(it.expiresAt), ":ep": avN(w.epoch),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

// notFinishedCondition is the part of a take's condition that requires the slot not finished under
// plan epoch e: not finished, or finished by a holder that acquired it under an older plan (an item
// without epoch was written under plan 0). It uses #fin, #ep, :false and :ep.
func notFinishedCondition(e int64) string {
	if e == 0 {
		return "(attribute_not_exists(#fin) OR #fin = :false)"
	}
	return "(attribute_not_exists(#fin) OR #fin = :false OR attribute_not_exists(#ep) OR #ep < :ep)"
}

// oldExpCondition is the part of a take's condition that requires the expiry it read: a holder
// whose renewals rewrite one version (this package before renewals were conditioned on the
// version they replace, see Lease.renew) still moves the expiry, so a take based on an older read
// cannot land.
func oldExpCondition(it slotItem) string {
	if it.expiresAt.IsZero() {
		return "attribute_not_exists(#exp)"
	}
	return "#exp = :oldExp"
}

// settleTake decides what a write that did not report success did (see take): a failed condition
// is a lost race unless the item found is ours; an unknown outcome is settled by a consistent
// re-read, or remembered as unsettled when that cannot tell.
func (c *Client) settleTake(ctx context.Context, w *takeWrite, err error) (*Lease, slotItem, error) {
	t, it := w.t, w.before
	if cf, ok := conditionFailed(err); ok {
		cur := decodeSlot(cf.Item)
		if !cur.exists {
			// No ALL_OLD (the item is gone, or the service left it out): read what beat us.
			var rerr error
			if cur, rerr = c.readSlot(ctx, t.pk, it.sk); rerr != nil {
				return nil, slotItem{}, rerr
			}
		}
		cur.sk = it.sk
		if w.ours(cur) {
			c.log.Info("lock: acquisition found landed by an earlier attempt whose answer was lost",
				"pk", t.pk, "slot", it.sk, "token", w.token)
			return c.newLease(t, it, cur, w.now), slotItem{}, nil
		}
		return nil, cur, errTaken
	}
	err = c.tableErr(err)
	var te *TableError
	if errors.As(err, &te) {
		return nil, slotItem{}, fmt.Errorf("lock: acquire %s/%d: %w", t.pk, it.sk, err)
	}
	if ctx.Err() != nil {
		c.rememberUnsettled(t.pk, it, w.nonce, w.token) // cancelled in flight: it may still land
		return nil, slotItem{}, fmt.Errorf("lock: acquire %s/%d: %w", t.pk, it.sk, err)
	}
	// The outcome is unknown (timeout, transport): a consistent re-read settles it, so a write
	// that did land is not left holding a slot nobody uses until it expires.
	cur, rerr := c.readSlot(ctx, t.pk, it.sk)
	switch {
	case rerr != nil:
		c.rememberUnsettled(t.pk, it, w.nonce, w.token)
		return nil, slotItem{}, fmt.Errorf("lock: acquire %s/%d: %w", t.pk, it.sk, errors.Join(err, rerr))
	case w.ours(cur):
		return c.newLease(t, it, cur, w.now), slotItem{}, nil
	case cur.exists && (cur.token != it.token || cur.version != it.version):
		return nil, cur, errTaken // our write's condition can no longer hold: it never lands
	default:
		c.rememberUnsettled(t.pk, it, w.nonce, w.token)
		return nil, slotItem{}, fmt.Errorf("lock: acquire %s/%d: %w", t.pk, it.sk, err)
	}
}

// rememberUnsettled records an acquisition write of unknown outcome that may still land.
func (c *Client) rememberUnsettled(pk string, before slotItem, nonce string, token int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unsettled == nil {
		c.unsettled = map[itemKey]unsettledTake{}
	}
	c.unsettled[itemKey{pk, before.sk}] = unsettledTake{nonce: nonce, token: token, before: before}
}

// adoptLanded looks for an acquisition write of ours whose outcome stayed unknown and that landed
// after all: the item carries its nonce. No goroutine holds a Lease for it (its take returned an
// error), so one caller adopts it: while the lease is still valid by our clock it is returned;
// otherwise it is released at once, so that it is free now rather than after TTL + skew. Writes
// that can no longer land (the item moved past their token) are forgotten.
func (c *Client) adoptLanded(ctx context.Context, t target, v view, now time.Time) (*Lease, error) {
	slots := v.slots
	c.mu.Lock()
	var found []unsettledTake
	for s := range v.n {
		k := itemKey{t.pk, s}
		u, ok := c.unsettled[k]
		if !ok {
			continue
		}
		it := slots[s]
		switch {
		case it.nonce == u.nonce && it.owner == c.owner && it.token == u.token:
			delete(c.unsettled, k)
			if !it.released && !it.finished {
				found = append(found, u)
			}
		case it.token >= u.token:
			delete(c.unsettled, k) // someone else took that token, or a later one
		}
	}
	c.mu.Unlock()
	var lease *Lease
	for _, u := range found {
		it := slots[u.before.sk]
		it.sk = u.before.sk
		if lease == nil && now.Before(it.expiresAt.Add(-c.margin)) {
			c.log.Info("lock: acquisition of unknown outcome found landed later; adopted", "pk", t.pk, "slot", it.sk, "token", it.token)
			lease = c.newLease(t, u.before, it, now)
			continue
		}
		// Expired by our clock (or we already adopted one): give it back so it is free now.
		cur, err := c.releaseLanded(ctx, t.pk, it)
		if err != nil {
			if lease != nil {
				return lease, nil // the item expires by itself
			}
			return nil, err
		}
		c.log.Info("lock: acquisition of unknown outcome found landed later; released", "pk", t.pk, "slot", it.sk, "token", it.token)
		slots[it.sk] = cur
	}
	return lease, nil
}

// releaseLanded sets released on an item of ours no Lease holds, fenced on owner, token and nonce;
// it returns the item as written (or as found, when it moved on meanwhile).
func (c *Client) releaseLanded(ctx context.Context, pk string, it slotItem) (slotItem, error) {
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.table),
		Key:                                 key(pk, it.sk),
		UpdateExpression:                    aws.String("SET #rel = :true"),
		ConditionExpression:                 aws.String("#owner = :me AND #token = :token AND #nonce = :nonce"),
		ExpressionAttributeNames:            map[string]string{"#owner": attrOwner, "#token": attrToken, "#nonce": attrNonce, "#rel": attrReleased},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":me": avS(c.owner), ":token": avN(it.token), ":nonce": avS(it.nonce), ":true": avB(true)},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if cf, ok := conditionFailed(err); ok {
		cur := decodeSlot(cf.Item)
		cur.sk = it.sk
		return cur, nil
	}
	if err != nil {
		return slotItem{}, fmt.Errorf("lock: release %s/%d: %w", pk, it.sk, c.tableErr(err))
	}
	cur := decodeSlot(out.Attributes)
	cur.sk = it.sk
	return cur, nil
}

// recordMeta creates the group's meta item, or, when another contender created it first, checks
// that it agrees with ours. It returns the meta item as it wrote or found it: a read of the group
// made after the take that preceded it (see Lease.GroupAfterTake).
func (c *Client) recordMeta(ctx context.Context, t target) (metaItem, error) {
	item := encodeMeta(t.pk, t.n, t.meta)
	_, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(c.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		c.noteSize(t.pk, metaItem{exists: true, n: t.n})
		return decodeMeta(item), nil
	}
	cf, ok := conditionFailed(err)
	if !ok {
		return metaItem{}, fmt.Errorf("lock: record group %q: %w", t.name, c.tableErr(err))
	}
	have := decodeMeta(cf.Item)
	if !have.exists {
		if have, err = c.readMeta(ctx, t.pk); err != nil {
			return metaItem{}, err
		}
	}
	return have, checkMeta(t, have)
}
