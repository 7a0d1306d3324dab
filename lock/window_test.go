package lock

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
)

// A standby's poll of a large group reads one window of slots and the meta item, not the group.
func TestStandbyPollBoundedInN(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	for _, n := range []int{10, 300} {
		heldGroup(t, db, table, "g", n)
		cdb := &capacityDB{DynamoDBClient: db}
		c, err := New(cdb, table, WithOwner("standby"))
		require.NoError(t, err)
		for range 5 {
			_, err := c.TryAcquireSlot(ctx, "g", n)
			require.ErrorIs(t, err, ErrNoFreeSlot)
		}
		require.LessOrEqual(t, cdb.items.Load(), int64(5*(windowSize+1)), "n = %d", n)
		require.LessOrEqual(t, cdb.calls.Load(), int64(5*2), "n = %d", n)
		_, err = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		require.NoError(t, err)
		require.NoError(t, dynamodb.NewTableNotExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute))
		require.NoError(t, CreateTable(ctx, db, table))
	}
}

// In a group larger than a window, a released slot is found within ceil(n/windowSize) rounds.
func TestWindowedStandbyFindsReleasedSlot(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n, free = 200, 137
	heldGroup(t, db, table, "g", n)
	_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK("g"), free),
		UpdateExpression: aws.String("SET released = :t"), ExpressionAttributeValues: map[string]typesAV{":t": avB(true)}})
	require.NoError(t, err)
	c, err := New(db, table, WithOwner("standby"))
	require.NoError(t, err)
	rounds := (n + windowSize - 1) / windowSize
	for i := range rounds {
		l, err := c.TryAcquireSlot(ctx, "g", n)
		if err == nil {
			require.Equal(t, free, l.Slot())
			require.Equal(t, int64(2), l.Token())
			require.NoError(t, l.Release(ctx))
			return
		}
		require.ErrorIs(t, err, ErrNoFreeSlot, "round %d", i)
	}
	t.Fatalf("the released slot was not found in %d rounds", rounds)
}

// A large group whose slots are all finished is reported finished (a window alone cannot tell).
func TestWindowedGroupFinished(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n = 130
	heldGroup(t, db, table, "g", n)
	for s := range n {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK("g"), s),
			UpdateExpression: aws.String("SET finished = :t"), ExpressionAttributeValues: map[string]typesAV{":t": avB(true)}})
		require.NoError(t, err)
	}
	c, err := New(db, table, WithOwner("late"))
	require.NoError(t, err)
	_, err = c.TryAcquireSlot(ctx, "g", n)
	require.ErrorIs(t, err, ErrGroupFinished)
}
