package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/follow"
)

// TestFollowerPersistentClaimFailureDoesNotRescanAtOnce (review of dc3330b): one item whose claim write
// fails every time with an error that is neither a condition failure nor a validation error (here
// ItemCollectionSizeLimitExceededException: an item in a full LSI item collection, which no retry
// fixes) makes every pass dirty with nextDue = now+min(RetryBackoff, PollInterval). Before dc3330b
// a continuous follower then waited PollInterval (30s) between full scans of its share; now it
// scans the whole share again every max(RetryBackoff, 100ms) plus the pass's own time, for as long
// as the failure lasts (for ever here), and never starts following the stream. No backoff grows
// across passes (failed passes get 1s..30s exponential backoff and OutageTimeout; a dirty pass
// gets neither).
func TestFollowerPersistentClaimFailureDoesNotRescanAtOnce(t *testing.T) {
	for _, backoff := range []time.Duration{0 /* default 1s */, 20 * time.Millisecond} {
		t.Run(fmt.Sprintf("RetryBackoff=%s", backoff), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
			const n = 20
			f.seed(t, 0, n, nil)
			poison := itemKey(0)
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.UpdateItemInput)
				if isTransition(in, ":until") && aws.ToString(in.TableName) == f.table {
					if id, ok := in.Key["id"].(*types.AttributeValueMemberS); ok && id.Value == poison {
						return nil, &types.ItemCollectionSizeLimitExceededException{Message: aws.String("test: item collection full")}
					}
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem)
			streams := newReviewStreams(t, true, 0)
			cfg := f.config(LedgerInline)
			cfg.Client = workerClient(fc)
			cfg.Workers, cfg.Follow, cfg.Streams = 1, true, streams
			cfg.RetryBackoff = backoff // PollInterval: the default, 30s
			w, err := New(cfg)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx, func(context.Context, Item) error { return nil }) }()
			reviewWait(t, 30*time.Second, func() (bool, string) {
				return w.Stats().Completed == n-1, fmt.Sprintf("%+v", w.Stats())
			})
			start := w.Stats()
			const watch = 4 * time.Second
			time.Sleep(watch)
			end := w.Stats()
			cancel()
			<-done
			passes, scanned := end.Passes-start.Passes, end.Scanned-start.Scanned
			t.Logf("in %s: %d passes, %d items scanned again (PollInterval 30s, RetryBackoff %s)", watch, passes, scanned, cfg.RetryBackoff)
			require.LessOrEqual(t, passes, int64(1),
				"a follower whose only problem is one item it cannot claim rescanned its whole share %d times in %s (%d items read)", passes, watch, scanned)
		})
	}
}
