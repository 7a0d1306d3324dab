package awslambda

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/clock"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

// timerClock is a fake clock that reports when each timer it hands out is due, so a test can move
// time from one timer to the next, never past a limit.
type timerClock struct {
	*clock.Fake
	mu  sync.Mutex
	due chan time.Time
}

func (c *timerClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.Fake.After(d)
	c.report(d)
	return ch
}

func (c *timerClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.Fake.AfterFunc(d, f)
	c.report(d)
	return stop
}

// report says when a timer of d from now is due (c.mu held).
func (c *timerClock) report(d time.Duration) {
	select {
	case c.due <- c.Fake.Now().Add(d):
	default:
	}
}

// With the adapter's defaults, draining the handlers in flight ends before the invocation's
// deadline with time left to release: time moves only from timer to timer and never reaches the
// last release time (1s) before the deadline, yet the invocation returns, its claim and slot released.
func TestDrainEndsBeforeTheDeadline(t *testing.T) {
	db := ddbtest.Client(t)
	ctx := context.Background()
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	leases := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(ctx, db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "only"},
	}})
	require.NoError(t, err)

	clk := &timerClock{Fake: clock.NewFake(time.Now()), due: make(chan time.Time, 1024)}
	cfg := worker.Config{
		Client: db, Table: table, LeaseTable: leases, Workers: 1, Clock: clk,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		LeaseTTL: time.Hour, Heartbeat: 10 * time.Minute, ClaimTTL: time.Hour, CheckpointInterval: time.Hour,
	}
	started := make(chan struct{})
	handler := Handler(cfg, func(hctx context.Context, _ worker.Item) error {
		close(started)
		<-hctx.Done() // a handler that runs until it is told to stop
		return hctx.Err()
	})
	deadline := clk.Now().Add(time.Minute)
	// The invocation's context: its real deadline is far; the worker reads it and times itself by clk.
	ictx, cancel := context.WithDeadline(ctx, deadline.Add(time.Hour))
	defer cancel()
	ictx = withDeadline{ictx, deadline}

	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := handler(ictx, nil)
		done <- result{res, err}
	}()
	limit := deadline.Add(-releaseTime(DefaultDeadlineMargin))
	recvStarted(t, started) // no timer needs to fire before the handler runs
	for {
		select {
		case r := <-done:
			require.NoError(t, r.err)
			require.Equal(t, 0, r.res.Slot)
			require.EqualValues(t, 1, r.res.Stats.Released, "the claim in flight was given back")
			require.False(t, clk.Now().After(limit))
			st, err := lock.New(db, leases)
			require.NoError(t, err)
			gs, err := st.GroupStatus(ctx, table+"/default")
			require.NoError(t, err)
			require.True(t, gs.Slots[0].Released)
			return
		case at := <-clk.due:
			if at.After(limit) {
				continue // a timer due only after the limit never fires
			}
			if at.After(clk.Now()) {
				clk.Advance(at.Sub(clk.Now()))
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the invocation did not return; fake time %s before the deadline", deadline.Sub(clk.Now()))
		}
	}
}

func recvStarted(t *testing.T, started <-chan struct{}) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never started")
	}
}

// withDeadline reports a deadline other than the one that cancels the context: the worker plans
// by Deadline() on its (fake) clock.
type withDeadline struct {
	context.Context
	at time.Time
}

func (w withDeadline) Deadline() (time.Time, bool) { return w.at, true }

// The adapter's defaults fit the drain and the release into the margin; a drain that does not fit
// is refused, naming the field.
func TestLambdaConfigFitsTheDrainIntoTheMargin(t *testing.T) {
	c, err := lambdaConfig(worker.Config{})
	require.NoError(t, err)
	require.True(t, c.Once)
	require.Equal(t, time.Second, c.DrainTimeout, "half of the default 2s margin")
	require.Positive(t, c.DrainTimeout)

	for field, cfg := range map[string]worker.Config{
		"DrainTimeout":   {DrainTimeout: 10 * time.Second},
		"DeadlineMargin": {DeadlineMargin: time.Millisecond},
		"DrainTimeout ":  {DeadlineMargin: 400 * time.Millisecond, DrainTimeout: 300 * time.Millisecond},
	} {
		_, err := lambdaConfig(cfg)
		var ce *worker.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, strings.TrimSpace(field), ce.Field)
	}
	c, err = lambdaConfig(worker.Config{DeadlineMargin: 30 * time.Second, DrainTimeout: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 20*time.Second, c.DrainTimeout)
	c, err = lambdaConfig(worker.Config{DeadlineMargin: 400 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 200*time.Millisecond, c.DrainTimeout)
}
