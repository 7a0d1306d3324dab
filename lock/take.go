package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The take: the conditional write that acquires a slot (or a mutex), and the settling of one whose
// outcome is unknown by the nonce it carries.

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
		return item, c.putNew(ctx, item)
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
