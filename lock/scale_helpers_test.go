package lock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynapart/dynapart/ddbfault"
	"github.com/stretchr/testify/require"
)

// capacityDB is a client that counts calls and the items the reads returned, and asks DynamoDB for
// the consumed capacity of every call and sums it.
type capacityDB struct {
	DynamoDBClient
	calls, items atomic.Int64
	mu           sync.Mutex
	rcu, wcu     float64
}

func newCapacityDB(db ddbfault.Next) *capacityDB {
	fc := ddbfault.New(db)
	c := &capacityDB{DynamoDBClient: fc}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		c.calls.Add(1)
		switch in := call.In.(type) {
		case *dynamodb.GetItemInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.QueryInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.PutItemInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		case *dynamodb.UpdateItemInput:
			in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		}
		out, err := send(ctx, call.In)
		if err != nil {
			return out, err
		}
		switch out := out.(type) {
		case *dynamodb.GetItemOutput:
			if out.Item != nil {
				c.items.Add(1)
			}
			c.add(out.ConsumedCapacity, true)
		case *dynamodb.QueryOutput:
			c.items.Add(int64(out.Count))
			c.add(out.ConsumedCapacity, true)
		case *dynamodb.PutItemOutput:
			c.add(out.ConsumedCapacity, false)
		case *dynamodb.UpdateItemOutput:
			c.add(out.ConsumedCapacity, false)
		}
		return out, err
	}, ddbfault.OpGetItem, ddbfault.OpQuery, ddbfault.OpPutItem, ddbfault.OpUpdateItem)
	return c
}

func (c *capacityDB) add(cc *types.ConsumedCapacity, read bool) {
	if cc == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if read {
		c.rcu += aws.ToFloat64(cc.CapacityUnits)
	} else {
		c.wcu += aws.ToFloat64(cc.CapacityUnits)
	}
}

func (c *capacityDB) capacity() (rcu, wcu float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rcu, c.wcu
}

// heldGroup writes group's meta item (n slots) and n slot items held by "holder" until an hour
// from now, as a holder's acquisition would, with BatchWriteItem (fast set-up of a large group).
func heldGroup(t testing.TB, db *dynamodb.Client, table, group string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pk := groupPK(group)
	now := time.Now()
	items := []map[string]types.AttributeValue{encodeMeta(pk, n, nil)}
	for s := range n {
		it := key(pk, s)
		it[attrOwner] = avS("holder")
		it[attrToken] = avN(1)
		it[attrVersion] = avN(1)
		it[attrExpiresAt] = avT(now.Add(time.Hour))
		it[attrAcquiredAt] = avT(now)
		it[attrReleased] = avB(false)
		it[attrNonce] = avS(fmt.Sprintf("nonce-%d", s))
		items = append(items, it)
	}
	for lo := 0; lo < len(items); lo += 25 {
		var reqs []types.WriteRequest
		for _, it := range items[lo:min(lo+25, len(items))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		for len(reqs) > 0 {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			require.NoError(t, err)
			reqs = out.UnprocessedItems[table]
		}
	}
}

type typesAV = types.AttributeValue

type typesN = types.AttributeValueMemberN

// pollCost is what a waiting standby's rounds cost: its first round (a sweep of the whole group
// when nothing is free) and the mean of the polls after it.
type pollCost struct {
	firstItems                float64
	rcu, calls, items, pollsN float64
}

// standbyPolls runs AcquireSlot on a group whose n slots are all held until the standby has made
// polls polls after its first round, and returns their cost. The test hook on the standby's wait
// marks the rounds, so the counts are exact.
func standbyPolls(t testing.TB, db *dynamodb.Client, table, group string, n, polls int) pollCost {
	t.Helper()
	cdb := newCapacityDB(db)
	c, err := New(cdb, table, WithOwner("standby"), WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cost pollCost
	var rounds int
	var rcu0 float64
	var calls0, items0 int64
	c.hooks.standby = func(string, time.Time) {
		rounds++
		switch rounds {
		case 1:
			rcu0, _ = cdb.capacity()
			calls0, items0 = cdb.calls.Load(), cdb.items.Load()
			cost.firstItems = float64(items0)
		case 1 + polls:
			r, _ := cdb.capacity()
			cost.rcu = (r - rcu0) / float64(polls)
			cost.calls = float64(cdb.calls.Load()-calls0) / float64(polls)
			cost.items = float64(cdb.items.Load()-items0) / float64(polls)
			cost.pollsN = float64(polls)
			cancel()
		}
	}
	_, err = c.AcquireSlot(ctx, group, n)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, float64(polls), cost.pollsN)
	return cost
}
