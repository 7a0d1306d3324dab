package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/ledger"
)

// TestVersionedGroupBesideFollowerGetsContentAsClaimed: a group that records versions but does not
// follow the stream (a back-fill beside a stream tail, as examples/lambda runs them), claim mode.
// Between its scan and its claim, another group of the same job (a follower) handles the item's
// content n=1, the item changes to n=2, and the follower reopens it for n=2. The back-fill's claim
// lands on the reopened state: its handler must get n=2, the content as of its claim, and record
// n=2's version. It got the scanned n=1: n=1 handled twice (its effects committed twice) and the
// item recorded done at n=1 while holding n=2.
func TestVersionedGroupBesideFollowerGetsContentAsClaimed(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%t", kind, batch), func(t *testing.T) {
				ctx := context.Background()
				f := newFixture(t, 0)
				f.seed(t, 0, 1, func(_ int, it map[string]types.AttributeValue) { it["n"] = &types.AttributeValueMemberN{Value: "1"} })
				id := itemKey(0)
				// The follower's ledger: its renew leaves the retry due at once on every clock within
				// 5s (before the back-fill's claim read its clock, too).
				other := f.ledger(t, kind, "", ledger.WithVersions(), ledger.WithMaxClockSkew(5*time.Second))
				read := func() (map[string]types.AttributeValue, error) {
					out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: skey(id), ConsistentRead: aws.Bool(true)})
					if err != nil {
						return nil, err
					}
					return out.Item, nil
				}
				// The follower's turn, run once just before the back-fill's first claim write (on
				// the worker's goroutine: it returns its error for the test to check).
				follower := func() error {
					item, err := read()
					if err != nil {
						return err
					}
					now := time.Now()
					outs, err := other.Claim(ctx, []ledger.ClaimRequest{{Key: skey(id), Owner: "F", Now: now, Until: now.Add(time.Minute),
						Version: other.ContentVersion(item)}})
					if err != nil || !outs[0].Claimed {
						return fmt.Errorf("the follower's claim: %+v, %v", outs, err)
					}
					if err := other.Complete(ctx, outs[0].Claim, time.Now()); err != nil {
						return err
					}
					if err := f.setN(0, 2); err != nil {
						return err
					}
					st, err := other.State(ctx, skey(id))
					if err != nil {
						return err
					}
					reopened, err := other.Renew(ctx, skey(id), st.Claim, time.Now())
					if err == nil && reopened == "" {
						err = fmt.Errorf("the follower's renew was refused (state %+v)", st)
					}
					return err
				}
				followerErr := errors.New("the back-fill made no claim")
				fc := ddbfault.New(f.db)
				var once sync.Once
				fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
					if f.isClaimWrite(call) {
						once.Do(func() { followerErr = follower() }) // a claim: an UpdateItem with a claim expiry, or a statement batch of fresh claims
					}
					return send(ctx, call.In)
				}, ddbfault.OpUpdateItem, ddbfault.OpBatchExecuteStatement)

				c := fastTimings(f.config(kind))
				c.Client, c.Workers, c.Once, c.Concurrency, c.Versions, c.BatchClaims = fc, 1, true, 1, true, batch
				w, err := New(c)
				require.NoError(t, err)
				var mu sync.Mutex
				var seen []int
				require.NoError(t, runOnceWithin(t, w, func(_ context.Context, it Item) error {
					n, err := strconv.Atoi(it.Attrs["n"].(*types.AttributeValueMemberN).Value)
					mu.Lock()
					seen = append(seen, n)
					mu.Unlock()
					return err
				}, time.Minute))
				require.NoError(t, followerErr)
				require.Equal(t, []int{2}, seen, "the back-fill's handler runs once, on the content as of its claim")
				st, err := other.State(ctx, skey(id))
				require.NoError(t, err)
				require.Equal(t, StatusDone, st.Status)
				item, err := read()
				require.NoError(t, err)
				require.Equal(t, "2", item["n"].(*types.AttributeValueMemberN).Value)
				require.Equal(t, other.ContentVersion(item), st.Version, "done at n=2's version")
			})
		}
	}
}
