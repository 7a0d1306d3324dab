package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
)

// lossyStreams is reviewStreams that never delivers the record of one content change: the
// record the stream lost (its retention trimmed it before the reader got there).
type lossyStreams struct {
	*reviewStreams
	id, n string // the record whose new image has id with n, and whose old image has another n
}

func (s *lossyStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	out, err := s.reviewStreams.GetRecords(ctx, in, opts...)
	if err != nil || out == nil {
		return out, err
	}
	kept := out.Records[:0]
	for _, r := range out.Records {
		if r.Dynamodb != nil && streamS(r.Dynamodb.NewImage, "id") == s.id &&
			streamN(r.Dynamodb.NewImage, "n") == s.n && streamN(r.Dynamodb.OldImage, "n") != s.n {
			continue
		}
		kept = append(kept, r)
	}
	out.Records = kept
	return out, nil
}

func streamS(m map[string]stypes.AttributeValue, a string) string {
	if v, ok := m[a].(*stypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func streamN(m map[string]stypes.AttributeValue, a string) string {
	if v, ok := m[a].(*stypes.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

// TestRescanHandlesRenewedItem (found by an adversarial review): a checkpoint the stream no longer
// holds makes the worker scan the whole table again, reopening every finished item whose content
// changed since its version was recorded, and the reopened item is due for the same pass. Here the
// record of item 0's change is lost and the follower rescans: in claim mode the rescan reopened and
// handled item 0; in complete-only mode with the inline ledger it reopened it (Renew: retry) and
// then skipped it, because completeOnlyStates judged it by the state its scanned attributes show
// (done), and the stream's only later record of it is the Renew's own write (no content change):
// item 0 stayed in retry and its new version was never handled. Now the task carries the state of
// the renew.
func TestRescanHandlesRenewedItem(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("complete-only=%t", completeOnly), func(t *testing.T) {
			ctx := context.Background()
			const n = 3
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
			f.seed(t, 0, n, nil)
			runs := newReviewRuns()
			streams := &lossyStreams{reviewStreams: newReviewStreams(t, true, 0), id: itemKey(0), n: "1000"}
			w := startReview(t, f, LedgerInline, "A", streams, func(c *Config) {
				c.CompleteOnly = completeOnly
			}, func(_ context.Context, it Item) error {
				runs.add("A", it, false)
				return nil
			})
			streams.following(t)
			f.seed(t, n, 1, nil) // a record after the back-fill: the shard's checkpoint moves past it
			reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(n))) == 1, "the new item" })
			setN(t, f, 0, 1000) // its record is lost
			f.seed(t, n+1, 1, nil)
			reviewWait(t, 30*time.Second, func() (bool, string) {
				return len(runs.of(itemKey(n+1))) == 1, "the reader read past the lost record"
			})
			streams.trim.Store(true)
			streams.expire.Store(true)
			reviewWait(t, 30*time.Second, func() (bool, string) {
				fs := w.Stats().Follow
				return fs != nil && fs.Rescans > 0, "a rescan"
			})
			reviewWait(t, 15*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, LedgerInline, itemKey(0))
				return ok, fmt.Sprintf("%s; runs %v; stats %+v, follow %+v", why, runs.of(itemKey(0)), w.Stats(), *w.Stats().Follow)
			})
		})
	}
}
