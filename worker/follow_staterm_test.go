package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/ledger"
)

// TestFollowHandlesStateRemoved: with the inline ledger, a record that takes a finished item's
// state away makes it pending again, and the reader handles it even when its content is the one
// handled: a PutItem of the same content (README: an item rewritten whole is a new item), and a
// redrive of a dead letter. Before, both records were taken for rewrites of the same values and
// skipped: the item stayed pending (or, redriven, unhandled) while the worker followed.
func TestFollowHandlesStateRemoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed bool // the first run fails permanently (a dead letter)
		remove func(t *testing.T, f *fixture)
	}{
		{"put same content", false, func(t *testing.T, f *fixture) {
			_, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: itemKey(0)}, "n": &types.AttributeValueMemberN{Value: "0"},
			}})
			require.NoError(t, err)
		}},
		{"redrive", true, func(t *testing.T, f *fixture) {
			l, err := ledger.NewInline(f.db, f.table, []string{"id"})
			require.NoError(t, err)
			res, err := Redrive(context.Background(), l, []Key{skey(itemKey(0))}, time.Now())
			require.NoError(t, err)
			require.Equal(t, 1, res.Moved)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
			gs := newReviewStreams(t, true, 0)
			runs := newReviewRuns()
			var first atomic.Bool
			first.Store(tc.failed)
			h := func(ctx context.Context, it Item) error {
				if first.CompareAndSwap(true, false) {
					runs.add("A", it, true)
					return Permanent(errors.New("first run fails"))
				}
				return runs.handler("A")(ctx, it)
			}
			startReview(t, f, LedgerInline, "A", gs, nil, h)
			gs.following(t)
			f.seed(t, 0, 1, nil)
			want := StatusDone
			if tc.failed {
				want = StatusFailed
			}
			reviewWait(t, 30*time.Second, func() (bool, string) {
				_, st, _ := reviewVersionedState(t, f, LedgerInline, itemKey(0))
				return st.Status == want, "the first run's outcome"
			})
			tc.remove(t, f)
			reviewWait(t, 30*time.Second, func() (bool, string) {
				done, why := reviewDoneAtCurrent(t, f, LedgerInline, itemKey(0))
				return done && len(runs.of(itemKey(0))) == 2, why
			})
		})
	}
}
