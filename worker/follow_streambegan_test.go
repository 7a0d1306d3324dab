package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
)

// Regression tests from an adversarial review of follow mode: a change made while no stream was on
// was never handled when a follower resumed a pass begun before the stream was turned on, or
// followed a stream turned off and on again while the group was down (the checkpoint was judged
// by time only, not by when the stream began). Now the slot rescans the table.

// TestFollowResumedPassBeganBeforeStream: a worker without Follow (same group, Versions) is
// stopped in the middle of its pass; an item it handled changes, the stream is turned on, and a
// follower resumes the pass: the change is in no remaining page and in no stream record, so the
// follower rescans once the pass is over, and handles it.
func TestFollowResumedPassBeganBeforeStream(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f, runs := newFixture(t, 5), newReviewRuns()
			b := startStoppedMidPass(t, f, kind, nil, runs, func(c *Config) { c.Follow, c.Streams, c.Versions, c.PollInterval = false, nil, true, time.Minute })
			b.stop()
			setN(t, f, 0, 100) // a new version of a handled item, while no stream is on
			_, _, err := follow.EnableStream(context.Background(), f.db, f.table)
			require.NoError(t, err)
			a := startReview(t, f, kind, "A", newReviewStreams(t, true, 0), nil, runs.handler("A"))
			waitAllDoneAtCurrent(t, f, kind, 5, runs)
			require.GreaterOrEqual(t, a.Stats().Follow.Rescans, int64(1))
		})
	}
}

// TestFollowResumedPassBeganJustBeforeStream: as above, but the worker without Follow reads its
// clock ahead of the stream's (by 8s, within its MaxClockSkew of 9s) and the stream is turned on
// within those 8s after its pass began: by its clock the pass began after the stream. Its pass's
// start is saved MaxClockSkew early, so the follower that resumes the pass still rescans.
func TestFollowResumedPassBeganJustBeforeStream(t *testing.T) {
	f, runs := newFixture(t, 5), newReviewRuns()
	began := time.Now()
	b := startStoppedMidPass(t, f, LedgerInline, nil, runs, func(c *Config) {
		c.Follow, c.Streams, c.Versions, c.PollInterval = false, nil, true, time.Minute
		c.Clock, c.MaxClockSkew, c.LeaseTTL = aheadSystemClock{8 * time.Second}, 9*time.Second, 20*time.Second
	})
	b.stop()
	setN(t, f, 0, 100) // a new version of a handled item, while no stream is on
	_, _, err := follow.EnableStream(context.Background(), f.db, f.table)
	require.NoError(t, err)
	require.Less(t, time.Since(began), 8*time.Second, "the stream was turned on later than the clock's lead after the pass began: the case is not made")
	a := startReview(t, f, LedgerInline, "A", newReviewStreams(t, true, 0), nil, runs.handler("A"))
	waitAllDoneAtCurrent(t, f, LedgerInline, 5, runs)
	require.GreaterOrEqual(t, a.Stats().Follow.Rescans, int64(1))
}

// aheadSystemClock is the system clock read ahead by a fixed lead.
type aheadSystemClock struct{ ahead time.Duration }

func (c aheadSystemClock) Now() time.Time                       { return time.Now().Add(c.ahead) }
func (aheadSystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (aheadSystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// TestFollowStreamCycledWhileDown: a follower is stopped in the middle of its pass, or while
// following the stream; while the group is down the stream is turned off, an item changes, and the
// stream is turned on again (a new stream, whose records begin after the change). The restarted
// follower rescans and handles the change.
func TestFollowStreamCycledWhileDown(t *testing.T) {
	for _, following := range []bool{false, true} {
		for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
			t.Run(map[bool]string{false: "mid-pass", true: "following"}[following]+"/"+string(kind), func(t *testing.T) {
				ctx := context.Background()
				f, runs := newFixture(t, 5), newReviewRuns()
				_, _, err := follow.EnableStream(ctx, f.db, f.table)
				require.NoError(t, err)
				var b *reviewWorker
				if following {
					gb := newReviewStreams(t, true, 0)
					b = startReview(t, f, kind, "B", gb, nil, runs.handler("B"))
					gb.following(t)
					setN(t, f, 2, 200) // read from the stream: B's reader has checkpointed
					waitAllDoneAtCurrent(t, f, kind, 5, runs)
					reviewWait(t, 30*time.Second, func() (bool, string) { return b.Stats().Follow.Lag == 0, "lag" })
				} else {
					b = startStoppedMidPass(t, f, kind, newReviewStreams(t, true, 0), runs, nil)
				}
				b.stop()
				_, err = f.db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(f.table),
					StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}})
				require.NoError(t, err)
				setN(t, f, 0, 100) // in no stream
				_, changed, err := follow.EnableStream(ctx, f.db, f.table)
				require.NoError(t, err)
				require.True(t, changed)
				a := startReview(t, f, kind, "A", newReviewStreams(t, true, 0), nil, runs.handler("A"))
				waitAllDoneAtCurrent(t, f, kind, 5, runs)
				require.GreaterOrEqual(t, a.Stats().Follow.Rescans, int64(1))
			})
		}
	}
}

// startStoppedMidPass starts worker B (streams, mod as startReview takes them), which handles
// every item but item 1, whose handler blocks until B stops: B's pass is not over when it returns.
func startStoppedMidPass(t *testing.T, f *fixture, kind LedgerKind, streams follow.StreamsClient, runs *reviewRuns, mod func(*Config)) *reviewWorker {
	t.Helper()
	blocked := make(chan struct{})
	var once sync.Once
	b := startReview(t, f, kind, "B", streams, func(c *Config) {
		c.DrainTimeout = 10 * time.Millisecond
		if mod != nil {
			mod(c)
		}
	}, func(hctx context.Context, it Item) error {
		if keyID(it.Key) == itemKey(1) {
			once.Do(func() { close(blocked) })
			<-hctx.Done()
			return ErrStopped
		}
		runs.add("B", it, false)
		return nil
	})
	<-blocked
	reviewWait(t, 30*time.Second, func() (bool, string) { return reviewDoneAtCurrent(t, f, kind, itemKey(0)) })
	return b
}

// waitAllDoneAtCurrent waits until items 0..n-1 are done at the version of their current content.
func waitAllDoneAtCurrent(t *testing.T, f *fixture, kind LedgerKind, n int, runs *reviewRuns) {
	t.Helper()
	reviewWait(t, 60*time.Second, func() (bool, string) {
		for i := range n {
			if ok, why := reviewDoneAtCurrent(t, f, kind, itemKey(i)); !ok {
				return false, fmt.Sprintf("%s; runs %v", why, runs.of(itemKey(i)))
			}
		}
		return true, ""
	})
}
