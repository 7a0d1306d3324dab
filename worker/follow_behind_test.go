package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go"
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
		// emptyPeeks: how many empty pages the stream answers to a read of one record before
		// the records (DynamoDB may; found by a review of a9d12d9: one empty page used to read
		// as a shard read to its end, and B did not rescan).
		emptyPeeks int
	}{{LedgerInline, false, 0}, {LedgerTable, false, 0}, {LedgerInline, true, 0}, {LedgerTable, true, 0}, {LedgerInline, true, 3}, {LedgerInline, true, 9}} {
		kind := tc.kind
		t.Run(fmt.Sprintf("%s/down-early=%t/empty-peeks=%d", kind, tc.downEarly, tc.emptyPeeks), func(t *testing.T) {
			const retention, n = 4 * time.Second, 3
			f := streamFixture(t, retention, n)
			x := itemKey(0)
			runs := newReviewRuns()
			streams := &behindStreams{rollStreams: &rollStreams{dropStreams: &dropStreams{reviewStreams: newReviewStreams(t, true, 0), id: x}}, emptyPeeks: tc.emptyPeeks}
			a := startReview(t, f, kind, "A", streams, nil, runs.handler("A"))
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
			b := startReview(t, f, kind, "B", streams, nil, runs.handler("B"))
			reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(n))) == 1, "B follows the rolled stream" })
			reviewWait(t, 10*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, kind, x)
				return ok, fmt.Sprintf("%s; runs %v; A's follow %+v; B's follow %+v", why, runs.of(x), *a.Stats().Follow, *b.Stats().Follow)
			})
			if tc.downEarly {
				// (more than one when a loaded machine makes B's rescan itself outlast the 4s retention)
				require.GreaterOrEqual(t, b.Stats().Follow.Rescans, int64(1), "B judged that the group's oldest unread record is older than the retention")
			}
		})
	}
}

// behindStreams is rollStreams whose reader, while behind is set, reads nothing new: the records
// are there (a read of one record, as follow.Reader.ReadThrough makes, finds them), but the group
// has not read them yet. A read of one record answers emptyPeeks empty pages before the records
// (DynamoDB may), and fails while failPeeks is set; failRead fails the reader's next read, for
// good (its pass fails and the slot follows again).
type behindStreams struct {
	*rollStreams
	behind, failPeeks, failRead atomic.Bool
	emptyPeeks                  int
	reads                       atomic.Int64 // the reader's reads that reached the stream (peeks not counted)
}

// peekSkip marks the iterators of the empty pages a read of one record is answered with.
const peekSkip = "peek-skip-"

func (s *behindStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	switch {
	case aws.ToInt32(in.Limit) == 1 && s.failPeeks.Load():
		return nil, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "test: throttled"}
	case aws.ToInt32(in.Limit) == 1:
		it, skipped := aws.ToString(in.ShardIterator), 0
		if rest, ok := strings.CutPrefix(it, peekSkip); ok {
			n, real, _ := strings.Cut(rest, "|")
			skipped, _ = strconv.Atoi(n)
			it = real
		}
		if skipped < s.emptyPeeks {
			return &dynamodbstreams.GetRecordsOutput{NextShardIterator: aws.String(fmt.Sprintf("%s%d|%s", peekSkip, skipped+1, it))}, nil
		}
		cp := *in
		cp.ShardIterator = aws.String(it)
		in = &cp
	case s.behind.Load():
		return &dynamodbstreams.GetRecordsOutput{NextShardIterator: in.ShardIterator}, nil
	case s.failRead.CompareAndSwap(true, false):
		return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "test: one failed read"}
	}
	if in.Limit == nil {
		s.reads.Add(1)
	}
	return s.rollStreams.GetRecords(ctx, in, opts...)
}

// TestReaderRestartKeepsHowFarItRead (found by a review of a9d12d9): a follower whose reader
// failed and started again judged from the start of the pass it followed from, not from how far
// the group had read: one failed read of how far (throttled) then made it rescan the whole table
// of a group that had read everything. failPeeks false is the control. The table is written
// twice a second throughout: a shard read to its checkpoint counts as read as far as the
// checkpoint's record, so a group idle for longer than the retention rescans (follow.ReadThrough).
func TestReaderRestartKeepsHowFarItRead(t *testing.T) {
	for _, failPeeks := range []bool{true, false} {
		t.Run(fmt.Sprintf("fail-peeks=%t", failPeeks), func(t *testing.T) {
			const retention = 4 * time.Second
			f := streamFixture(t, retention, 3)
			review := newReviewStreams(t, true, 0)
			review.StreamsClient = newExactTimes(review.StreamsClient)
			streams := &behindStreams{rollStreams: &rollStreams{dropStreams: &dropStreams{reviewStreams: review, id: "none"}}}
			a := startReview(t, f, LedgerInline, "A", streams, nil, func(context.Context, Item) error { return nil })
			streams.following(t)
			reviewWait(t, 30*time.Second, func() (bool, string) { return a.Stats().Completed == 3, "A's pass" })
			stop := keepWriting(t, f, 3, 500*time.Millisecond)
			defer stop()
			time.Sleep(2 * retention) // all read as it comes; the pass's start older than the retention
			require.Zero(t, a.Stats().Follow.Rescans, "kept up so far")
			streams.failPeeks.Store(failPeeks)
			streams.failRead.Store(true)
			reviewWait(t, 10*time.Second, func() (bool, string) { return !streams.failRead.Load(), "A's read failed" })
			reads := streams.reads.Load()
			reviewWait(t, 10*time.Second, func() (bool, string) { // the failed pass's pause (1s +-20%), then the reader again
				return streams.reads.Load() > reads, "A's reader reads again"
			})
			time.Sleep(time.Second) // its checks: a look every ~80ms under the 4s retention
			streams.failPeeks.Store(false)
			require.Zero(t, a.Stats().Follow.Rescans, "a group that read everything rescanned after its reader started again")
		})
	}
}

// keepWriting changes one of the fixture's n items every period, in turn, until stop is called.
func keepWriting(t *testing.T, f *fixture, n int, period time.Duration) (stop func()) {
	t.Helper()
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(period):
			}
			if err := f.setN(i%n, 5000+i); err != nil {
				t.Errorf("write item %d: %v", i%n, err)
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// TestKeepingUpDoesNotRescan: a group that keeps up with a stream written all the time has a
// record in flight at many of its reads of how far it has read; it never falls behind by the
// retention, and never rescans. The writes come in bursts a second apart, and the stream's record
// times are exact (exactTimes: DynamoDB Local rounds them down to the minute, far older than the
// 8s retention here).
func TestKeepingUpDoesNotRescan(t *testing.T) {
	f := streamFixture(t, 8*time.Second, 3)
	streams := newReviewStreams(t, true, 0)
	streams.StreamsClient = newExactTimes(streams.StreamsClient)
	var logs syncBuffer
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	a := startReview(t, f, LedgerInline, "A", streams, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}, func(context.Context, Item) error { return nil })
	streams.following(t)
	reviewWait(t, 30*time.Second, func() (bool, string) { return a.Stats().Completed == 3, "A's pass" })
	const writes = 60
	for i := range writes { // 2.5 retentions of a write to each item every second
		setN(t, f, i%3, 2000+i)
		if i%3 == 2 {
			time.Sleep(time.Second)
		}
	}
	reviewWait(t, 30*time.Second, func() (bool, string) {
		fs := a.Stats().Follow
		return fs.Handled >= writes-3, fmt.Sprintf("A's follow %+v", *fs)
	})
	require.Zero(t, a.Stats().Follow.Rescans, "a group keeping up rescanned")
}

// streamFixture is a fixture whose table streams, with n items, under a stream retention
// shortened to retention.
func streamFixture(t *testing.T, retention time.Duration, n int) *fixture {
	t.Helper()
	shortRetention(t, retention)
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(context.Background(), f.db, f.table)
	require.NoError(t, err)
	f.seed(t, 0, n, nil)
	return f
}

// failListStreams is behindStreams whose every DescribeStream fails while failAll is set: every
// reader the slot starts fails at once, and so does every read of how far the group has read.
type failListStreams struct {
	*behindStreams
	failAll atomic.Bool
}

func (s *failListStreams) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	if s.failAll.Load() {
		return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "test: denied"}
	}
	return s.behindStreams.DescribeStream(ctx, in, opts...)
}

// TestReaderFailingUntilTheStreamDropped (found by a review of 172465e): B takes the slot while
// every reader it starts fails at once; X changes, nobody reads it, and the stream drops it with
// its shard and the shard's child. The looks at how far the group had read waited a whole period
// at every reader's start and never came; when the reader recovered, the first look moved since
// past X's dropped record before judging it, and nothing rescanned. Now the looks keep their
// schedule from the slot's first reader, a group is judged behind before since moves, and a
// follower found behind rescans also when its reader failed first.
func TestReaderFailingUntilTheStreamDropped(t *testing.T) {
	const retention, n = 24 * time.Second, 3 // a look every 480ms
	f := streamFixture(t, retention, n)
	x := itemKey(0)
	runs := newReviewRuns()
	streams := &failListStreams{behindStreams: &behindStreams{rollStreams: &rollStreams{dropStreams: &dropStreams{reviewStreams: newReviewStreams(t, true, 0), id: x}}}}
	a := startReview(t, f, LedgerInline, "A", streams, nil, runs.handler("A"))
	streams.following(t)
	reviewWait(t, 30*time.Second, func() (bool, string) { return a.Stats().Completed == n, "A's pass" })
	time.Sleep(2 * time.Second) // A looks how far the group has read, and saves it
	a.stop()
	streams.failAll.Store(true)
	b := startReview(t, f, LedgerInline, "B", streams, nil, runs.handler("B"))
	time.Sleep(500 * time.Millisecond)
	setN(t, f, 0, 1000) // nobody can read it
	time.Sleep(retention + 2*time.Second)
	streams.drop.Store("all")
	streams.gens.Store(2)
	f.seed(t, n, 1, nil)
	streams.failAll.Store(false)
	reviewWait(t, 60*time.Second, func() (bool, string) { return len(runs.of(itemKey(n))) == 1, "B follows the rolled stream" })
	reviewWait(t, 10*time.Second, func() (bool, string) {
		ok, why := reviewDoneAtCurrent(t, f, LedgerInline, x)
		return ok, fmt.Sprintf("%s; runs %v; B rescans %d", why, runs.of(x), b.Stats().Follow.Rescans)
	})
}

// TestFollowerFailuresFarApart (found by a review of 172465e): a follower's outage was never reset
// while it followed, so two reader failures OutageTimeout apart, with good following between
// them, ended the worker. Now a failure after the slot followed for longer than OutageTimeout
// begins a new outage.
func TestFollowerFailuresFarApart(t *testing.T) {
	f := streamFixture(t, 0, 3)
	streams := &behindStreams{rollStreams: &rollStreams{dropStreams: &dropStreams{reviewStreams: newReviewStreams(t, true, 0), id: "none"}}}
	a := startReview(t, f, LedgerInline, "A", streams, func(c *Config) { c.OutageTimeout = 3 * time.Second },
		func(context.Context, Item) error { return nil })
	streams.following(t)
	reviewWait(t, 30*time.Second, func() (bool, string) { return a.Stats().Completed == 3, "A's pass" })
	for i := range 2 {
		streams.failRead.Store(true)
		reviewWait(t, 10*time.Second, func() (bool, string) { return !streams.failRead.Load(), fmt.Sprintf("failure %d", i+1) })
		// Timed from the reader's restart, not from the failure: the failed pass's backoff (1s
		// +-20%) and the old reader's shutdown come first, and the slot judges its outage from the
		// restart (followStream's began): from the failure, 5s left as little as 0.8s of margin.
		reads := streams.reads.Load()
		reviewWait(t, 10*time.Second, func() (bool, string) {
			return streams.reads.Load() > reads, fmt.Sprintf("the reader reads again after failure %d", i+1)
		})
		time.Sleep(5 * time.Second) // followed fine for longer than OutageTimeout
	}
	select {
	case err := <-a.done:
		t.Fatalf("the worker ended after two reader failures 5s apart (OutageTimeout 3s): %v", err)
	default:
	}
}

// keptFollowing.final counts what the following pass moved to done and failed until its handlers
// were done, not what keepFollowing counted when it returned: found behind, it returns while
// handlers still run, and the items they finished after were never counted (helper-81).
func TestKeptFollowingCountsTheHandlersFinishedLate(t *testing.T) {
	since := time.UnixMilli(1_700_000_000_000)
	p := &pass{}
	p.counts.done.Store(2)
	k := keptFollowing{base: slotCounts{done: 5, failed: 1, scanned: 9}, counts: slotCounts{done: 7, failed: 1, scanned: 9, since: since}}
	p.counts.done.Store(4) // two more handlers finished after keepFollowing returned
	p.counts.failed.Store(1)
	require.Equal(t, slotCounts{done: 9, failed: 2, scanned: 9, since: since}, k.final(p))
}
