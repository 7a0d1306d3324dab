package worker

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/follow"
)

// TestRescanRenewOfUnknownOutcome (a review of 05640ec found it): the rescan's Renew of item 0 lands
// but its answer is lost, and the read that settles it fails too: ledger.Renew returns an error,
// renewIfChanged returns the scanned state (done), the pass skips the item as finished and asks
// for no other pass (notNow of a finished state), so the pass is clean and the worker follows the
// stream, whose only later record of the item is the Renew's own write (no content change). The
// item stays in retry and its new version is never handled: the hole 05640ec closed for a renew
// that answered, left open for one whose outcome is unknown (both ledgers and modes). The renew
// whose outcome is unknown now asks for another pass, which finds the item due. (The table
// ledger's dispatch judges the item by its row, read after the renew: it passed before too.)
func TestRescanRenewOfUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		kind         LedgerKind
		completeOnly bool
	}{{LedgerInline, false}, {LedgerInline, true}, {LedgerTable, false}} {
		kind, completeOnly := tc.kind, tc.completeOnly
		t.Run(fmt.Sprintf("%s/complete-only=%t", kind, completeOnly), func(t *testing.T) {
			ctx := context.Background()
			const n = 3
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
			f.seed(t, 0, n, nil)
			target := itemKey(0)
			isTarget := func(k map[string]types.AttributeValue) bool { // the item's key or its ledger row's
				for _, v := range k {
					if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, target) {
						return true
					}
				}
				return false
			}
			var armed, failRead, lost atomic.Bool
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				switch in := call.In.(type) {
				case *dynamodb.UpdateItemInput:
					if armed.Load() && isTarget(in.Key) && strings.Contains(aws.ToString(in.ConditionExpression), ":prev") && lost.CompareAndSwap(false, true) {
						if _, err := send(ctx, call.In); err != nil { // lands
							return nil, err
						}
						failRead.Store(true)
						return nil, errTransient // its answer is lost
					}
				case *dynamodb.GetItemInput:
					if isTarget(in.Key) && failRead.CompareAndSwap(true, false) {
						return nil, errTransient // and the read that settles it fails
					}
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem, ddbfault.OpGetItem)
			runs := newReviewRuns()
			streams := &lossyStreams{reviewStreams: newReviewStreams(t, true, 0), id: target, n: "1000"}
			w := startReview(t, f, kind, "A", streams, func(c *Config) {
				c.CompleteOnly = completeOnly
				c.Client = workerClient(fc)
				c.PollInterval = 2 * time.Second // the pass the unknown renew asks for
			}, func(_ context.Context, it Item) error {
				runs.add("A", it, false)
				return nil
			})
			loseChangeThenTrim(t, f, streams, runs, n, func() { armed.Store(true) })
			reviewWait(t, 30*time.Second, func() (bool, string) {
				fs := w.Stats().Follow
				return fs != nil && fs.Rescans > 0 && lost.Load(), "a rescan that renews item 0"
			})
			reviewWait(t, 15*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, kind, target)
				return ok, fmt.Sprintf("%s; runs %v; stats %+v, follow %+v", why, runs.of(target), w.Stats(), *w.Stats().Follow)
			})
		})
	}
}

// loseChangeThenTrim: with a worker following the stream (its handler adding to runs; items 0..n-1
// seeded), item 0 changes to n=1000 and its record is lost (streams, a lossyStreams for item 0 and
// n=1000), the reader reads past it (item n+1 handled), arm is called, and the stream's next
// iterator is trimmed: the worker rescans.
func loseChangeThenTrim(t *testing.T, f *fixture, streams *lossyStreams, runs *reviewRuns, n int, arm func()) {
	t.Helper()
	streams.following(t)
	f.seed(t, n, 1, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(n))) == 1, "the new item" })
	setN(t, f, 0, 1000) // its record is lost
	f.seed(t, n+1, 1, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) {
		return len(runs.of(itemKey(n+1))) == 1, "the reader read past the lost record"
	})
	arm()
	streams.trim.Store(true)
	streams.expire.Store(true)
}
