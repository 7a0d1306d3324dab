package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/ledger"
)

// TestFollowTooLargeItemResolved (from an adversarial review): a follower meets, from the stream,
// an item near 400 KB that cannot take its outcome: with effects, the commit of a handler's effect
// that grows it is refused and so is the dead letter, even with the short note; without, its
// claim fits and its completion does not. The item is counted unprocessable after one handler
// run and the candidate is resolved, so the shard's later record (item 1) is handled. Before, the
// candidate was not resolved: the item was claimed and handled again at every claim expiry, and
// the shard's later records waited for ever.
func TestFollowTooLargeItemResolved(t *testing.T) {
	for _, tc := range []struct {
		name    string
		room    int  // bytes under 400 KB
		effects bool // the handler's effect grows the item by 1,000 bytes
	}{{"effect grows it", 200, true}, {"completion does not fit", 160, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(context.Background(), f.db, f.table)
			require.NoError(t, err)
			gs := newReviewStreams(t, true, 1)
			runs := newReviewRuns()
			w := startReview(t, f, LedgerInline, "A", gs, func(c *Config) { c.MaxAttempts = 3 }, WithEffects(func(_ context.Context, it Item) (*Effects, error) {
				runs.add("A", it, false)
				e := &Effects{}
				if tc.effects && keyID(it.Key) == itemKey(0) {
					return e.Item(ledger.Set("note", strings.Repeat("y", 1000))), nil
				}
				return e, nil
			}))
			gs.following(t)
			f.seed(t, 0, 1, func(_ int, item map[string]types.AttributeValue) {
				item["big"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", 409600-2-len(itemKey(0))-3-tc.room)}
				delete(item, "n")
			})
			f.seed(t, 1, 1, nil)
			reviewWait(t, 20*time.Second, func() (bool, string) {
				return len(runs.of(itemKey(1))) == 1, fmt.Sprintf("item 1 not handled: unprocessable %d, handler runs on the big item %d, follow %+v",
					w.Stats().Unprocessable, len(runs.of(itemKey(0))), w.Stats().Follow)
			})
			require.Len(t, runs.of(itemKey(0)), 1, "handler runs on the big item")
			require.Equal(t, int64(1), w.Stats().Unprocessable)
		})
	}
}
