package worker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/ledger"
)

// TestFollowEffectNotUTF8RunsOnce: a follower's handler returns an effect whose text is not UTF-8
// (a string cut inside a character). DynamoDB would store U+FFFD for the bad byte, not what the
// completion records as the version handled, so the table ledger's follower took the stream
// record of its own write for a change and ran the handler on its output again and again (344
// runs in 8 s). The effect is refused before anything is written: one run, the item dead-lettered
// naming the attribute, its content unchanged.
func TestFollowEffectNotUTF8RunsOnce(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
			f.seed(t, 0, 1, func(_ int, item map[string]types.AttributeValue) {
				item["text"] = &types.AttributeValueMemberS{Value: "héllo"}
			})
			var runs atomic.Int64
			h := WithEffects(func(_ context.Context, it Item) (*ledger.Effects, error) {
				runs.Add(1)
				text := it.Attrs["text"].(*types.AttributeValueMemberS).Value
				return new(ledger.Effects).Item(ledger.Set("summary", text[:2]), ledger.Add("runs", 1)), nil
			})
			gs := newReviewStreams(t, true, 0)
			w := startReview(t, f, kind, "A", gs, nil, h)
			gs.following(t)
			reviewWait(t, 30*time.Second, func() (bool, string) {
				_, st, _ := reviewVersionedState(t, f, kind, itemKey(0))
				return st.Status == StatusFailed, fmt.Sprintf("item 0 dead-lettered: %+v", st)
			})
			reviewWait(t, 30*time.Second, func() (bool, string) { return w.resolved() >= 1, "the seed's record resolved" })
			item, st, _ := reviewVersionedState(t, f, kind, itemKey(0))
			require.Contains(t, st.Error, `attribute "summary"`)
			require.Contains(t, st.Error, "not UTF-8")
			require.EqualValues(t, 1, runs.Load())
			require.NotContains(t, item, "summary")
			require.NotContains(t, item, "runs")
		})
	}
}
