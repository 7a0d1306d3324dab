package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Late-landing takes: an acquisition write whose outcome stayed unknown may land after its caller
// gave up; the Client remembers it, and its next round adopts the lease it made or, when already
// expired, releases it, so that no slot sits held by nobody.

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

type unsettledTake struct {
	nonce  string
	token  int64
	before slotItem // the item the write replaced (for TookOver)
}
