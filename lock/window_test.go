package lock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
)

// A standby's poll of a large group reads one window of slots and the meta item, not the group;
// only its first round reads every window (nothing is free).
func TestStandbyPollBoundedInN(t *testing.T) {
	db, table := lockTable(t)
	for _, n := range []int{10, 300} {
		group := fmt.Sprintf("g%d", n)
		heldGroup(t, db, table, group, n)
		cost := standbyPolls(t, db, table, group, n, 5)
		require.LessOrEqual(t, cost.items, float64(windowSize+1), "n = %d", n)
		require.LessOrEqual(t, cost.calls, 2.0, "n = %d", n)
		require.Equal(t, float64(n+1), cost.firstItems, "n = %d: the first round sweeps the whole group once", n)
	}
}

func releaseDirect(t *testing.T, db *dynamodb.Client, table, group string, slot int) {
	t.Helper()
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(groupPK(group), slot),
		UpdateExpression: aws.String("SET released = :t"), ExpressionAttributeValues: map[string]typesAV{":t": avB(true)}})
	require.NoError(t, err)
}

// TryAcquireSlot on a group larger than a window looks at every window: a free slot anywhere is
// found in one call.
func TestTryAcquireSlotSweepsLargeGroup(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	const n, free = 200, 137
	heldGroup(t, db, table, "g", n)
	releaseDirect(t, db, table, "g", free)
	c, err := New(db, table, WithOwner("standby"))
	require.NoError(t, err)
	l, err := c.TryAcquireSlot(ctx, "g", n)
	require.NoError(t, err)
	require.Equal(t, free, l.Slot())
	require.Equal(t, int64(2), l.Token())
	require.NoError(t, l.Release(ctx))
}

// A waiting standby of a group larger than a window, polling one window at a time, finds a slot
// released after its first round within ceil(n/windowSize) polls.
func TestWindowedStandbyFindsReleasedSlot(t *testing.T) {
	db, table := lockTable(t)
	const n, free = 200, 137
	heldGroup(t, db, table, "g", n)
	c, err := New(db, table, WithOwner("standby"), WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	polls := 0
	c.hooks.standby = func(string, time.Time) {
		polls++
		if polls == 1 {
			releaseDirect(t, db, table, "g", free)
		}
	}
	l, err := c.AcquireSlot(ctx, "g", n)
	require.NoError(t, err)
	require.Equal(t, free, l.Slot())
	require.LessOrEqual(t, polls, 1+(n+windowSize-1)/windowSize)
	require.NoError(t, l.Release(context.Background()))
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
