package worker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
)

// TestReadersBehindThenDown (the gap the last stop left open, found by review 5): a group stops
// while its readers are behind (here one batch, held by a handler that does not return, keeps its
// the shard's reader has not read the record of X's change), and stays down for less than the
// retention. Meanwhile the shard they were behind in closed and went, and so did its child: the
// stream lists only a grandchild, whose parent has no lease. The follow checkpoint said when A
// last followed, so B saw no downtime to judge; the parent's lease check sees one generation
// only; and X's change was never handled. Now the follow checkpoint says how far the group had
// read the stream (follow.Reader.ReadThrough), and a group behind by the retention rescans.
func TestReadersBehindThenDown(t *testing.T) {
	for _, tc := range []struct {
		kind LedgerKind
		// downEarly: A stops 1s after it fell behind, and B starts once the retention has
		// passed (the group down for less than it), and judges; otherwise A, still following,
		// finds its group behind by the retention and rescans.
		downEarly bool
	}{{LedgerInline, false}, {LedgerTable, false}, {LedgerInline, true}, {LedgerTable, true}} {
		kind := tc.kind
		t.Run(fmt.Sprintf("%s/down-early=%t", kind, tc.downEarly), func(t *testing.T) {
			const retention = 4 * time.Second
			shortRetention(t, retention)
			ctx := context.Background()
			const n = 3
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
			f.seed(t, 0, n, nil)
			x := itemKey(0)
			runs := newReviewRuns()
			streams := &behindStreams{rollStreams: &rollStreams{dropStreams: &dropStreams{reviewStreams: newReviewStreams(t, true, 0), id: x}}}
			h := func(by string) Handler {
				return func(_ context.Context, it Item) error {
					runs.add(by, it, false)
					return nil
				}
			}
			a := startReview(t, f, kind, "A", streams, nil, h("A"))
			streams.following(t)
			reviewWait(t, 30*time.Second, func() (bool, string) { return a.Stats().Completed == n, "A's pass" })
			reviewWait(t, 30*time.Second, func() (bool, string) {
				fs := a.Stats().Follow
				return fs != nil && len(fs.Shards) > 0 && fs.Shards[0].Position != "", "A follows: its shard checkpoint saved"
			})
			streams.behind.Store(true)
			setN(t, f, 0, 1000)
			changed := time.Now()
			if tc.downEarly {
				time.Sleep(time.Second)
			} else {
				reviewWait(t, 2*retention, func() (bool, string) {
					return a.Stats().Follow.Rescans > 0, "A, behind X's record by the retention, rescans"
				})
			}
			a.stop()
			streams.drop.Store("all") // X's record is gone ...
			streams.gens.Store(2)     // ... with its shard and the shard's child
			f.seed(t, n, 1, nil)
			streams.behind.Store(false)
			time.Sleep(time.Until(changed.Add(retention))) // down less than the retention, behind longer
			b := startReview(t, f, kind, "B", streams, nil, h("B"))
			reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(n))) == 1, "B follows the rolled stream" })
			reviewWait(t, 10*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, kind, x)
				return ok, fmt.Sprintf("%s; runs %v; A's follow %+v; B's follow %+v", why, runs.of(x), *a.Stats().Follow, *b.Stats().Follow)
			})
			if tc.downEarly {
				require.Equal(t, int64(1), b.Stats().Follow.Rescans, "B judged that the group's oldest unread record is older than the retention")
			}
		})
	}
}

// behindStreams is rollStreams whose reader, while behind is set, reads nothing new: the records
// are there (a read of one record, as follow.Reader.ReadThrough makes, finds them), but the group
// has not read them yet.
type behindStreams struct {
	*rollStreams
	behind atomic.Bool
}

func (s *behindStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	if s.behind.Load() && aws.ToInt32(in.Limit) != 1 {
		return &dynamodbstreams.GetRecordsOutput{NextShardIterator: in.ShardIterator}, nil
	}
	return s.rollStreams.GetRecords(ctx, in, opts...)
}

// TestKeepingUpDoesNotRescan: a group that keeps up with a stream written all the time has a
// record in flight at many of its reads of how far it has read; it never falls behind by the
// retention, and never rescans. (DynamoDB Local rounds a record's creation time down to the
// minute, so a record in flight reads as older than the 4s retention here.)
func TestKeepingUpDoesNotRescan(t *testing.T) {
	const retention = 4 * time.Second
	shortRetention(t, retention)
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	f.seed(t, 0, 3, nil)
	streams := newReviewStreams(t, true, 0)
	a := startReview(t, f, LedgerInline, "A", streams, nil, func(context.Context, Item) error { return nil })
	streams.following(t)
	reviewWait(t, 30*time.Second, func() (bool, string) { return a.Stats().Completed == 3, "A's pass" })
	const writes = 60
	for i := range writes { // 3 retentions of a write every 200ms
		setN(t, f, i%3, 2000+i)
		time.Sleep(200 * time.Millisecond)
	}
	reviewWait(t, 30*time.Second, func() (bool, string) {
		fs := a.Stats().Follow
		return fs.Handled >= writes-3, fmt.Sprintf("A's follow %+v", *fs)
	})
	require.Zero(t, a.Stats().Follow.Rescans, "a group keeping up rescanned")
}
