package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
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

// TestFollowSwitchesUnderSteadyWrites: a follower's share is written to all the time (updates of
// items the pass handled already, deletes) and it still follows the stream after at most two
// passes, while the writes go on. Before the fix every pass after the first was dirty: an item
// renewed because it changed since it was done was then judged not yet due (its retry time was
// read after the claim's), so under steady writes the worker scanned again and again instead of
// following (115 passes in a minute here; 24 dirty passes of 26 in the chaos scenario).
func TestFollowSwitchesUnderSteadyWrites(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) { testFollowSwitch(t, kind) })
	}
}

func testFollowSwitch(t *testing.T, kind LedgerKind) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const seeded = 600
	f := newFixture(t, seeded)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	streams := newReviewStreams(t, true, 0)
	cfg := f.config(kind)
	cfg.Workers, cfg.Follow, cfg.Streams, cfg.Concurrency = 1, true, streams, 8
	cfg.StreamPoll, cfg.PollInterval = 50*time.Millisecond, 100*time.Millisecond // a dirty pass is scanned again at once
	w, err := New(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func(context.Context, Item) error { return nil }) }()

	// The writer: an update of a random item every 20ms and a delete of another every 4th time,
	// until the worker follows (or a minute has passed: then the test fails below on the passes it
	// counted). Not more: DynamoDB Local slows down as its streams grow, for every later test.
	var writes atomic.Int64
	var werr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		wctx := context.Background()
		r := rand.New(rand.NewPCG(7, 35))
		deadline := time.After(time.Minute)
		for {
			select {
			case <-stop:
				return
			case <-deadline:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, werr = f.db.UpdateItem(wctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(f.table), Key: skey(itemKey(r.IntN(seeded))), UpdateExpression: aws.String("SET n = :n"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.Itoa(1_000_000 + r.IntN(1_000_000))}},
			})
			if writes.Add(1)%4 == 0 && werr == nil {
				_, werr = f.db.DeleteItem(wctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: skey(itemKey(r.IntN(seeded)))})
			}
			if werr != nil {
				return
			}
		}
	})
	stopWriter := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopWriter()
	select {
	case <-streams.reading:
	case <-time.After(90 * time.Second):
		st := w.Stats()
		t.Fatalf("the worker did not follow the stream: %d passes, %d items scanned, %d completed, %d skipped, %d writes", st.Passes, st.Scanned, st.Completed, st.Skipped, writes.Load())
	}
	passes, during := w.Stats().Passes, writes.Load()
	stopWriter()
	require.NoError(t, werr)
	require.Positive(t, during, "the writer was writing while the pass ran")
	require.LessOrEqual(t, passes, int64(2), "passes before the worker followed the stream under steady writes (%d writes)", during)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}
}

// TestClaimOfADeletedItemNeedsNoOtherPass: a claim refused because its item was deleted after the
// scan read it leaves nothing to do: the pass is clean, so a Once worker finishes after one pass
// (and a follower follows the stream). Before the fix the refusal asked for another pass at once.
func TestClaimOfADeletedItemNeedsNoOtherPass(t *testing.T) {
	for _, completeOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("complete-only=%t", completeOnly), func(t *testing.T) {
			const n = 5
			f := newFixture(t, n)
			var first onceFlag
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.UpdateItemInput)
				if aws.ToString(in.TableName) == f.table && first.first() {
					_, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: in.TableName, Key: in.Key})
					require.NoError(t, err)
				}
				return send(ctx, in)
			}, ddbfault.OpUpdateItem)
			c := f.config(LedgerInline)
			c.Client, c.Workers, c.Once, c.Concurrency, c.CompleteOnly = workerClient(fc), 1, true, 1, completeOnly
			w, err := New(c)
			require.NoError(t, err)
			require.NoError(t, w.Run(context.Background(), func(context.Context, Item) error { return nil }))
			st := w.Stats()
			require.True(t, first.used.Load(), "an item was deleted before its write")
			require.Equal(t, int64(n-1), st.Completed)
			require.Equal(t, int64(1), st.Passes, "a deleted item asks for no other pass")
		})
	}
}
