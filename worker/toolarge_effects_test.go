package worker

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// TestTooLargeItemWithEffectsEnds: an item near DynamoDB's 400 KB limit, handled by an effects
// handler, ends as failed or unprocessable after one handler run; before, it was neither done nor
// failed and the once-job never ended (found by an adversarial review). Cases, inline ledger:
//   - item, other-table: the item cannot take the completion's attributes (30 bytes of room); the
//     commit is refused (merged: an *EffectError; a transaction: cancelled with ValidationError,
//     which was taken for a transient error and sent again every RetryBackoff), and so is the
//     failure record: unprocessable, the item left pending.
//   - grows, complete-only: the completion fits but the effect (1,000 bytes) does not: the commit
//     is refused and the failure record, whose error text did not fit either (refused, then sent
//     again every RetryBackoff), is stored with a short note instead: failed.
//   - grows, claim: the claim's attributes use up the room; the dead letter is refused even with
//     the note: unprocessable (before: an unknown outcome, the item claimed again at every expiry).
func TestTooLargeItemWithEffectsEnds(t *testing.T) {
	for _, tc := range []struct {
		mode, kind string
		room       int           // bytes under 400 KB
		want       ledger.Status // the item's state after the run
	}{
		{"complete-only", "item", 30, StatusPending},
		{"complete-only", "other-table", 30, StatusPending},
		{"complete-only", "grows", 200, StatusFailed},
		{"claim", "grows", 200, StatusClaimed},
	} {
		t.Run(tc.mode+"/"+tc.kind, func(t *testing.T) {
			f := newFixture(t, 0)
			other := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
			_, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: "k0000"}, "big": &types.AttributeValueMemberS{Value: strings.Repeat("x", 409600-7-3-tc.room)}}})
			require.NoError(t, err)
			c := fastTimings(f.config(LedgerInline))
			c.Workers, c.Once, c.CompleteOnly, c.MaxAttempts, c.ClaimTTL = 1, true, tc.mode == "complete-only", 3, 2*time.Second
			w, err := New(c)
			require.NoError(t, err)
			var calls atomic.Int64
			h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
				calls.Add(1)
				e := &Effects{}
				switch tc.kind {
				case "item":
					return e.Item(ledger.Set("m", 1)), nil
				case "grows":
					return e.Item(ledger.Set("note", strings.Repeat("y", 1000))), nil
				}
				return e.Update(other, ledger.Key{"pk": &types.AttributeValueMemberS{Value: "c"}}, ledger.Add("n", 1)), nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = w.Run(ctx, h)
			require.False(t, errors.Is(err, context.DeadlineExceeded), "the once-job did not end")
			require.NoError(t, err)
			require.Equal(t, int64(1), calls.Load(), "handler runs")
			st, err := f.ledger(t, LedgerInline, "").State(context.Background(), skey("k0000"))
			require.NoError(t, err)
			require.Equal(t, tc.want, st.Status)
			stats := w.Stats()
			if tc.want == StatusFailed {
				require.Equal(t, int64(1), stats.DeadLettered)
				require.Contains(t, st.Error, "not stored")
			} else {
				require.Equal(t, int64(1), stats.Unprocessable)
			}
			out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(other), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "c"}}})
			require.NoError(t, err)
			require.Empty(t, out.Item, "an effect was applied without its completion")
		})
	}
}
