package worker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// TestRescanItemReadFails (found by a review of ef374da): the table ledger's rescan
// (renewChangedRows) reads each changed row's item before it renews it. When that GetItem failed,
// the item was skipped silently: the claim that followed was refused (the row done, at the old
// version), the rescan was clean and the worker followed the stream from its oldest record, which
// no longer held the change: the new version was never handled. Now the failed read asks for
// another pass.
func TestRescanItemReadFails(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("complete-only=%t", completeOnly), func(t *testing.T) {
			ctx := context.Background()
			const n = 3
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
			f.seed(t, 0, n, nil)
			target := itemKey(0)
			var armed, failed atomic.Bool
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.GetItemInput)
				if armed.Load() && aws.ToString(in.TableName) == f.table {
					if id, ok := in.Key["id"].(*types.AttributeValueMemberS); ok && id.Value == target && failed.CompareAndSwap(false, true) {
						return nil, errTransient // one read of the item fails (a dropped connection after the SDK's retries)
					}
				}
				return send(ctx, call.In)
			}, ddbfault.OpGetItem)
			runs := newReviewRuns()
			streams := &lossyStreams{reviewStreams: newReviewStreams(t, true, 0), id: target, n: "1000"}
			w := startReview(t, f, LedgerTable, "A", streams, func(c *Config) {
				c.CompleteOnly = completeOnly
				c.Client = workerClient(fc)
				c.PollInterval = 2 * time.Second
			}, func(_ context.Context, it Item) error {
				runs.add("A", it, false)
				return nil
			})
			loseChangeThenTrim(t, f, streams, runs, n, func() { armed.Store(true) })
			reviewWait(t, 30*time.Second, func() (bool, string) {
				fs := w.Stats().Follow
				return fs != nil && fs.Rescans > 0 && failed.Load(), "a rescan whose read of item 0 fails"
			})
			reviewWait(t, 15*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, LedgerTable, target)
				return ok, fmt.Sprintf("%s; runs %v; stats %+v, follow %+v", why, runs.of(target), w.Stats(), *w.Stats().Follow)
			})
		})
	}
}

// TestRenewTooLargeDoesNotBlockTheShard (found by a review of ef374da): a done item whose new
// content leaves less room under DynamoDB's 400 KB limit than the inline ledger's Renew adds
// (dp_retry_at, "retry" for "done"): the Renew is refused with a ValidationException every time.
// followOne tried again for ever, so the candidate's batch was never Done and the shard's later
// records waited: the next item was never handled. Now the item is unprocessable (counted,
// logged), as a claim refused so is.
func TestRenewTooLargeDoesNotBlockTheShard(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	gs := newReviewStreams(t, true, 1) // one record a page (DynamoDB may cut pages anywhere)
	runs := newReviewRuns()
	w := startReview(t, f, LedgerInline, "A", gs, nil, func(_ context.Context, it Item) error {
		runs.add("A", it, false)
		return nil
	})
	gs.following(t)
	x := itemKey(0)
	f.seed(t, 0, 1, func(_ int, item map[string]types.AttributeValue) {
		item["big"] = &types.AttributeValueMemberB{Value: make([]byte, 380*1024)}
	})
	reviewWait(t, 30*time.Second, func() (bool, string) {
		ok, why := reviewDoneAtCurrent(t, f, LedgerInline, x)
		return ok, why
	})
	fillToLimit(t, f, x)
	f.seed(t, 1, 1, nil) // and a normal item after it, in the same shard
	reviewWait(t, 15*time.Second, func() (bool, string) {
		return len(runs.of(itemKey(1))) == 1, fmt.Sprintf("the item after X's change is not handled: runs of X %v, stats %+v, follow %+v",
			runs.of(x), w.Stats(), *w.Stats().Follow)
	})
	require.Equal(t, int64(1), w.Stats().Unprocessable, "X's renew, refused for good")
}

// TestRenewTooLargeInARescan (found by a review of ef374da): the same item met by a rescan (its
// change's record lost, then a trim): renewIfChanged's Renew is refused with a
// ValidationException, which ef374da's again() took for an outcome that may have landed: every
// rescan was dirty, and the follower scanned the whole table every PollInterval for ever. Now the
// item is unprocessable and the rescan clean.
func TestRenewTooLargeInARescan(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	x := itemKey(0)
	streams := &dropStreams{reviewStreams: newReviewStreams(t, true, 0), id: x}
	w := startReview(t, f, LedgerInline, "A", streams, func(c *Config) { c.PollInterval = time.Second },
		func(context.Context, Item) error { return nil })
	streams.following(t)
	f.seed(t, 0, 1, func(_ int, item map[string]types.AttributeValue) {
		item["big"] = &types.AttributeValueMemberB{Value: make([]byte, 380*1024)}
	})
	f.seed(t, 1, 5, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) {
		ok, why := reviewDoneAtCurrent(t, f, LedgerInline, x)
		return ok && w.Stats().Completed == 6, why
	})
	streams.drop.Store("all") // X's change is lost
	fillToLimit(t, f, x)
	f.seed(t, 6, 1, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) { return w.Stats().Completed == 7, "the reader read past the lost record" })
	streams.trim.Store(true)
	streams.expire.Store(true)
	reviewWait(t, 30*time.Second, func() (bool, string) {
		fs := w.Stats().Follow
		return fs != nil && fs.Rescans == 1, "a rescan"
	})
	start := w.Stats()
	const watch = 6 * time.Second
	time.Sleep(watch)
	end := w.Stats()
	t.Logf("in %s after the rescan: %d passes, %d items scanned; X: %v", watch, end.Passes-start.Passes, end.Scanned-start.Scanned,
		func() string { _, why := reviewDoneAtCurrent(t, f, LedgerInline, x); return why }())
	require.LessOrEqual(t, end.Passes-start.Passes, int64(1), "the follower keeps rescanning the whole table (PollInterval 1s) instead of following the stream")
	require.Equal(t, int64(1), end.Unprocessable, "X's renew, refused for good")
}

// fillToLimit gives done item x a new version whose size leaves less room under 400 KB than a
// Renew adds: the largest "big" that fits with x's done state, found on a copy in a table of its
// own.
func fillToLimit(t *testing.T, f *fixture, x string) {
	t.Helper()
	ctx := context.Background()
	out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: skey(x), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	scratch := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "id", Type: "S"})
	fits := func(size int) bool {
		item := map[string]types.AttributeValue{}
		for k, v := range out.Item {
			item[k] = v
		}
		item["big"] = &types.AttributeValueMemberB{Value: make([]byte, size)}
		_, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(scratch), Item: item})
		return err == nil
	}
	lo, hi := 380*1024, 400*1024
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	t.Logf("largest big that fits with the done state: %d bytes", lo)
	_, err = f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.table), Key: skey(x),
		UpdateExpression:          aws.String("SET big = :b"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":b": &types.AttributeValueMemberB{Value: make([]byte, lo)}}})
	require.NoError(t, err) // a new version of X
}

// dropStreams is reviewStreams that, once drop is set, never delivers a record of item id: every
// record of it is older than the stream's trim horizon of the scenario (the records it lost).
type dropStreams struct {
	*reviewStreams
	id   string
	drop atomic.Value // string
}

func (s *dropStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	out, err := s.reviewStreams.GetRecords(ctx, in, opts...)
	if err != nil || out == nil {
		return out, err
	}
	drop, _ := s.drop.Load().(string)
	kept := out.Records[:0]
	for _, r := range out.Records {
		if r.Dynamodb != nil && drop != "" && (streamS(r.Dynamodb.NewImage, "id") == s.id || streamS(r.Dynamodb.Keys, "id") == s.id) {
			continue
		}
		kept = append(kept, r)
	}
	out.Records = kept
	return out, nil
}

// TestRescanRenewRefused: a rescan's renew of a changed item is refused because another worker
// renewed it first and stopped before claiming it (the item is left a retry, due). The pass used
// to skip the item as finished and ask for another pass, a PollInterval (30s) later; now it reads
// the item's state and claims it in the same pass. The other worker's renew lands a few
// milliseconds after the pass read its clock for the page, so its retry is due after that reading:
// judged by it, the retry was not yet due and the item waited for the next pass (this failed 1 run
// in 24, and always once the other renew came 3 ms later); now a renewed state is judged by the
// clock read after it. With the other worker's clock ahead (within MaxClockSkew) its renew's
// retry was due in this worker's future, and the item waited the same way (found by a review of
// that fix); now a renew leaves the retry due at its time less MaxClockSkew.
func TestRescanRenewRefused(t *testing.T) {
	const skewed = 500 * time.Millisecond // this worker's MaxClockSkew
	for _, c := range []struct {
		completeOnly bool
		ahead        time.Duration // how far the other worker's clock is ahead of this one's
		otherSkew    time.Duration // the other's MaxClockSkew: 0 leaves its retry due at its own time
	}{{false, 0, 0}, {true, 0, 0}, {false, 300 * time.Millisecond, skewed}} {
		completeOnly := c.completeOnly
		t.Run(fmt.Sprintf("complete-only=%t/ahead=%s", completeOnly, c.ahead), func(t *testing.T) {
			ctx := context.Background()
			const n = 3
			f := newFixture(t, 0)
			_, _, err := follow.EnableStream(ctx, f.db, f.table)
			require.NoError(t, err)
			f.seed(t, 0, n, nil)
			target := itemKey(0)
			other, err := ledger.NewInline(f.db, f.table, []string{"id"}, ledger.WithVersions(), ledger.WithMaxClockSkew(c.otherSkew))
			require.NoError(t, err)
			var armed, raced atomic.Bool
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.UpdateItemInput)
				prev, isRenew := in.ExpressionAttributeValues[":prev"].(*types.AttributeValueMemberS)
				_, zeroes := in.ExpressionAttributeValues[":zero"] // attempts 0: a renew, not a complete-only write
				isRenew = isRenew && zeroes
				if armed.Load() && isRenew && keyID(in.Key) == target && raced.CompareAndSwap(false, true) {
					// Another worker renews first, a few milliseconds after this pass read its clock for
					// the page (the retry it leaves is due at the other's time, later than that).
					time.Sleep(3 * time.Millisecond)
					id, err := other.Renew(ctx, in.Key, prev.Value, time.Now().Add(c.ahead))
					if err != nil || id == "" {
						return nil, fmt.Errorf("test: the other renew: %q %v", id, err)
					}
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem)
			runs := newReviewRuns()
			streams := &lossyStreams{reviewStreams: newReviewStreams(t, true, 0), id: target, n: "1000"}
			w := startReview(t, f, LedgerInline, "A", streams, func(c *Config) {
				c.CompleteOnly = completeOnly
				c.Client = workerClient(fc)
				c.PollInterval = 30 * time.Second
				c.MaxClockSkew = skewed
			}, func(_ context.Context, it Item) error {
				runs.add("A", it, false)
				return nil
			})
			loseChangeThenTrim(t, f, streams, runs, n, func() { armed.Store(true) })
			reviewWait(t, 10*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, LedgerInline, target)
				return ok && raced.Load(), fmt.Sprintf("%s; raced %t; runs %v; follow %+v", why, raced.Load(), runs.of(target), *w.Stats().Follow)
			})
			require.Equal(t, int64(1), w.Stats().Follow.Rescans)
		})
	}
}
