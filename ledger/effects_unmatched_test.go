package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// Regression tests from an adversarial review of --exec-effects: a commit that DynamoDB cancels
// with fewer cancellation reasons than it has actions (DynamoDB Local gives one reason for some
// refusals) was sent again and again until its context ended (the handler's attempt then of
// unknown outcome, its error lost), and an update of another item's key attribute in the items'
// own table was not refused before writing.

// TestEffectsKeyAttributeOfAnotherItem: an update that removes another table's key attribute is
// refused by DynamoDB (one reason for two actions on DynamoDB Local): a permanent *EffectError at
// once, nothing applied; one that sets a key attribute of another item of the items' own table is
// refused before anything is sent.
func TestEffectsKeyAttributeOfAnotherItem(t *testing.T) {
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			e := newEffectsEnv(t, kind)
			k := lcKey(0)
			lcSeeder(t, e.raw, e.source)(k, lcKey(1))
			c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err := e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Update(e.other, otherKey("x"), Remove("pk")))
			require.ErrorIs(t, err, ErrEffectRefused)
			require.Less(t, time.Since(start), 10*time.Second, "sent again until the context ended")
			require.Equal(t, StatusClaimed, lcState(t, e.l, k).Status, "nothing of the commit applied")

			sent := e.fc.CallsByOp()[ddbfault.OpTransactWriteItems]
			err = e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Update(e.source, lcKey(1), Set("id", "k9999")))
			var ee *EffectError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, "id", ee.Attr)
			require.Equal(t, sent, e.fc.CallsByOp()[ddbfault.OpTransactWriteItems], "refused before writing")
		})
	}
}

// TestEffectsUnmatchedConditionReasons: a commit cancelled for a failed condition with one reason
// for its two actions is decided by the row: the completion's condition still holds (a put of the
// caller's met an existing row): a permanent *EffectError, nothing applied; it does not (another
// claim took the item): the claim is lost.
func TestEffectsUnmatchedConditionReasons(t *testing.T) {
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // before the fix: sent again until it ended
			defer cancel()
			e := newEffectsEnv(t, kind)
			e.fc.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
				out, err := send(ctx, c.In)
				var tce *types.TransactionCanceledException
				if errors.As(err, &tce) && len(tce.CancellationReasons) > 1 {
					return nil, &types.TransactionCanceledException{Message: tce.Message,
						CancellationReasons: []types.CancellationReason{{Code: aws.String("ConditionalCheckFailed")}}}
				}
				return out, err
			}, ddbfault.OpTransactWriteItems)
			k := lcKey(0)
			lcSeeder(t, e.raw, e.source)(k)
			_, err := e.raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.other), Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "row"}}})
			require.NoError(t, err)
			c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
			err = e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).PutIfAbsent(e.other, map[string]any{"pk": "row", "n": 1}))
			require.ErrorIs(t, err, ErrEffectRefused)
			require.Equal(t, StatusClaimed, lcState(t, e.l, k).Status, "nothing of the commit applied")

			taken := lcMustClaim(t, e.l, lcReq(k, "W2", 0, 2, lcT0), 2) // a newer token takes it over
			err = e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).PutIfAbsent(e.other, map[string]any{"pk": "new", "n": 1}))
			require.ErrorIs(t, err, ErrClaimLost)
			require.Equal(t, taken.ID, lcState(t, e.l, k).Claim)
		})
	}
}

// TestEffectsReservedTableRefused: a write to a reserved table (a worker's lease table), by name
// or by ARN, is refused before anything is sent (it could break the group's leases and plan).
func TestEffectsReservedTableRefused(t *testing.T) {
	db, source, names := lcSourceTable(t)
	fc := ddbfault.New(db)
	l, err := NewInline(fc, source, names, WithReservedTables("my-leases"))
	require.NoError(t, err)
	k := lcKey(0)
	lcSeeder(t, db, source)(k)
	c := lcMustClaim(t, l, lcReq(k, "W1", 0, 1, lcT0), 1)
	for _, table := range []string{"my-leases", "arn:aws:dynamodb:us-east-1:123456789012:table/my-leases"} {
		sent := fc.Calls()
		err := l.CompleteWith(context.Background(), c, lcT0, (&Effects{}).Update(table, Key{"pk": &types.AttributeValueMemberS{Value: "group#g"}}, Set("n", 0)))
		var ee *EffectError
		require.ErrorAs(t, err, &ee)
		require.Contains(t, ee.Error(), "lease table")
		require.Equal(t, sent, fc.Calls(), "refused before anything was sent")
	}
	require.Equal(t, StatusClaimed, lcState(t, l, k).Status)
}
