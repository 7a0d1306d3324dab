package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// Resizes that meet other events of a running job: a standby that read the group before it
// existed, a slot being marked finished, faults in the re-plan's writes, pending retries, and a
// take whose round read the plan that has just ended.

// TestStandbyFromBeforeTheGroupFollowsAResize: three workers started with Workers 2 on a group
// that does not exist yet (the third stands by, having read the group before the first two
// created it). A resize to 3 must give the standby the new slot (issue 14: "Workers beyond the new
// N become standbys; missing slots are taken by standbys"), not end its Run with a
// *lock.GroupMismatchError: its Workers only said what the group should be created with.
func TestStandbyFromBeforeTheGroupFollowsAResize(t *testing.T) {
	f := newFixture(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	config := func(owner string) Config {
		c := fastTimings(f.config(LedgerInline))
		c.Workers, c.Owner = 2, owner
		return c
	}
	acquired := make(chan string, 64)
	start := func(c Config) <-chan error {
		c.Hooks.OnLease = func(e LeaseEvent) {
			if e.Kind == LeaseAcquired {
				select {
				case acquired <- c.Owner:
				default: // never block a worker on the test's bookkeeping
				}
			}
		}
		w, err := New(c)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx, func(context.Context, Item) error { return nil }) }()
		return done
	}
	// The standby reads the group (none yet) and goes to take a slot before the others create it.
	sc := config("standby")
	// Its takes of slots (PutItems) are held until open is closed; asked is closed at the first.
	asked, open := make(chan struct{}), make(chan struct{})
	var askedOnce sync.Once
	gate := ddbfault.New(f.db)
	gate.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		askedOnce.Do(func() { close(asked) })
		select {
		case <-open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return send(ctx, call.In)
	}, ddbfault.OpPutItem)
	sc.Client = workerClient(gate)
	standby := start(sc)
	<-asked
	a, b := start(config("a")), start(config("b"))
	for range 2 {
		select {
		case <-acquired:
		case <-time.After(30 * time.Second):
			t.Fatal("the first two workers did not take the group's slots")
		}
	}
	close(open)
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = Resize(context.Background(), locks, f.table+"/default", 3)
	require.NoError(t, err)

	deadline := time.After(30 * time.Second)
	for got := false; !got; {
		select {
		case owner := <-acquired:
			got = owner == "standby"
		case err := <-standby:
			t.Fatalf("the standby's Run ended on the resize: %v", err)
		case <-deadline:
			t.Fatal("the standby took no slot after the resize")
		}
	}
	cancel()
	for _, done := range []<-chan error{standby, a, b} {
		require.ErrorIs(t, <-done, context.Canceled)
	}
}

// resizeBeforeFinish is a worker's client over db that calls resize right before the first
// MarkFinished it sends reaches the table, so the slot is marked finished under a plan that has
// just ended.
func resizeBeforeFinish(db ddbfault.Next, resize func()) DynamoDBClient {
	fc := ddbfault.New(db)
	var once sync.Once
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		if strings.Contains(aws.ToString(in.UpdateExpression), "#fin = :true") { // the write that marks a slot finished
			once.Do(resize)
		}
		return send(ctx, in)
	}, ddbfault.OpUpdateItem)
	return workerClient(fc)
}

// TestResizeRacingMarkFinished: the group is scaled 2 -> 3 just before the first worker to finish
// its slot marks it finished. That mark is made under the old plan and does not count; the
// worker (which goes on helping) and the others must still handle every item exactly once and
// end with the three slots of the new plan finished under it.
func TestResizeRacingMarkFinished(t *testing.T) {
	const items = 600
	f := newFixture(t, items)
	var calls sync.Map
	h := func(_ context.Context, it Item) error {
		v, _ := calls.LoadOrStore(keyID(it.Key), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		return nil
	}
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 2 {
		c := fastTimings(f.config(LedgerInline))
		c.Workers, c.Once, c.Owner, c.PageSize = 2, true, fmt.Sprintf("w%d", i), 10
		c.Client = resizeBeforeFinish(f.db, func() {
			_, err := Resize(context.Background(), locks, c.Group, 3)
			require.NoError(t, err)
		})
		if c.Group == "" {
			c.Group = f.table + "/default"
		}
		w, err := New(c)
		require.NoError(t, err)
		wg.Go(func() { require.NoError(t, runOnceWithin(t, w, h, 90*time.Second)) })
	}
	wg.Wait()
	n := 0
	calls.Range(func(k, v any) bool {
		n++
		require.EqualValues(t, 1, v.(*atomic.Int64).Load(), "item %s", k)
		return true
	})
	require.Equal(t, items, n)
	st, err := locks.GroupStatus(context.Background(), f.table+"/default")
	require.NoError(t, err)
	require.Equal(t, 3, st.N)
	for _, s := range st.Slots[:3] {
		require.True(t, s.Finished && s.Epoch == st.Epoch, "slot %d finished under the current plan", s.Slot)
	}
}

// replanFaults is a worker's client that injects faults into the calls a re-plan makes: the
// first planStart Put lands but its answer is lost, and the first checkpoint save of epoch 2 (the
// one right after adopting the new plan's position) fails before it is sent.
type replanFaults struct {
	DynamoDBClient
	putLost, saveFailed onceFlag
}

var errInjected = errors.New("test: injected transport failure")

func newReplanFaults(db ddbfault.Next) *replanFaults {
	fc := ddbfault.New(db)
	r := &replanFaults{DynamoDBClient: workerClient(fc)}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.PutItemInput)
		if pk, ok := in.Item["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "plan#") && r.putLost.first() {
			if _, err := send(ctx, in); err != nil {
				return nil, err
			}
			return nil, errInjected
		}
		return send(ctx, in)
	}, ddbfault.OpPutItem)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		if savesCheckpointOf(in, 2) && r.saveFailed.first() {
			return nil, errInjected
		}
		return send(ctx, in)
	}, ddbfault.OpUpdateItem)
	return r
}

// savesCheckpointOf reports whether in saves a slot checkpoint made under plan epoch epoch.
func savesCheckpointOf(in *dynamodb.UpdateItemInput, epoch int) bool {
	cp, ok := in.ExpressionAttributeValues[":cp"].(*types.AttributeValueMemberS)
	return ok && strings.HasPrefix(cp.Value, fmt.Sprintf("dp3|%d.", epoch))
}

// TestResizeTwiceInQuickSuccessionWithFaults: a once job on 2 slots is scaled to 4 and at once to
// 3 while every worker is busy (holders of epoch 1 may be in the barrier or composing when epoch 2
// comes); the first planStart Put loses its answer and the first checkpoint save after an
// adoption fails. Every item is handled exactly once, the three slots end finished under epoch 2,
// and the job reads at most 1.25x the items (pages in flight at the resizes are read again).
func TestResizeTwiceInQuickSuccessionWithFaults(t *testing.T) {
	const items = 900
	f := newFixture(t, items)
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	group := f.table + "/default"
	var calls sync.Map
	var started atomic.Int64
	var resizeOnce sync.Once
	h := func(_ context.Context, it Item) error {
		v, _ := calls.LoadOrStore(keyID(it.Key), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		if started.Add(1) == items/3 {
			resizeOnce.Do(func() {
				for _, n := range []int{4, 3} {
					_, err := Resize(context.Background(), locks, group, n)
					require.NoError(t, err)
				}
			})
		}
		return nil
	}
	faults := newReplanFaults(f.db)
	var wg sync.WaitGroup
	var scanned atomic.Int64
	for i := range 4 {
		c := fastTimings(f.config(LedgerInline))
		c.Workers, c.Once, c.Owner, c.PageSize, c.Concurrency, c.Segments = 2, true, fmt.Sprintf("w%d", i), 10, 4, 24
		c.Client = faults
		if os.Getenv("RESIZE_DEBUG") != "" {
			c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("w", c.Owner)
		}
		w, err := New(c)
		require.NoError(t, err)
		wg.Go(func() {
			require.NoError(t, runOnceWithin(t, w, h, 120*time.Second))
			scanned.Add(w.Stats().Scanned)
		})
	}
	wg.Wait()
	n := 0
	calls.Range(func(k, v any) bool {
		n++
		require.EqualValues(t, 1, v.(*atomic.Int64).Load(), "item %s", k)
		return true
	})
	require.Equal(t, items, n)
	require.True(t, faults.putLost.used.Load(), "a planStart Put lost its answer")
	require.True(t, faults.saveFailed.used.Load(), "a save after an adoption failed")
	st, err := locks.GroupStatus(context.Background(), group)
	require.NoError(t, err)
	require.Equal(t, 3, st.N)
	require.Equal(t, int64(2), st.Epoch)
	for _, s := range st.Slots[:3] {
		require.True(t, s.Finished && s.Epoch == 2, "slot %d finished under epoch 2", s.Slot)
	}
	t.Logf("scanned %d items for %d", scanned.Load(), items)
	require.LessOrEqual(t, float64(scanned.Load()), 1.25*items)
}

// TestResizeWithRetriesPending: in every mode, a once job on 2 slots is scaled to 3 while items
// that failed their first attempt wait for their retry (the old holders' passes are dirty). Each
// such item is handled exactly twice (its retry made by whichever slot owns it under the new
// plan), every other item once, every item ends done, and the new plan's slots end finished.
func TestResizeWithRetriesPending(t *testing.T) {
	const items = 480
	for _, mode := range []scan.Mode{scan.ModeSegment, scan.ModeFilter, scan.ModeIndex} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t, 0)
			ctx := context.Background()
			if mode == scan.ModeIndex {
				require.NoError(t, scan.CreatePendingIndex(ctx, f.db, f.table, "dp_pending", "dp_shard"))
			}
			f.seed(t, 0, items, func(i int, it map[string]types.AttributeValue) {
				it["grp"] = &types.AttributeValueMemberN{Value: strconv.Itoa(i % 7)}
				if mode == scan.ModeIndex {
					scan.MarkPending(it, "id", "dp_shard", 8)
				}
			})
			locks, err := lock.New(f.db, f.leaseTable)
			require.NoError(t, err)
			group := f.table + "/default"
			var calls sync.Map
			var started atomic.Int64
			var resized sync.Once
			failsFirst := func(id string) bool { n, _ := strconv.Atoi(strings.TrimPrefix(id, "item-")); return n%8 == 0 }
			h := func(_ context.Context, it Item) error {
				id := keyID(it.Key)
				v, _ := calls.LoadOrStore(id, new(atomic.Int64))
				c := v.(*atomic.Int64).Add(1)
				if started.Add(1) == items/2 {
					resized.Do(func() {
						_, err := Resize(context.Background(), locks, group, 3)
						require.NoError(t, err)
					})
				}
				if failsFirst(id) && c == 1 {
					return errInjected
				}
				return nil
			}
			var wg sync.WaitGroup
			for i := range 3 {
				c := fastTimings(f.config(LedgerInline))
				c.Workers, c.Once, c.Owner, c.PageSize, c.Concurrency = 2, true, fmt.Sprintf("w%d", i), 10, 4
				c.Mode, c.RetryBackoff, c.MaxRetryBackoff = mode, 400*time.Millisecond, 400*time.Millisecond
				switch mode {
				case scan.ModeFilter:
					c.PartitionAttr = "grp"
				case scan.ModeIndex:
					c.Shards = 8
				default:
					c.Segments = 24
				}
				w, err := New(c)
				require.NoError(t, err)
				wg.Go(func() { require.NoError(t, runOnceWithin(t, w, h, 120*time.Second)) })
			}
			wg.Wait()
			n := 0
			calls.Range(func(k, v any) bool {
				n++
				want := int64(1)
				if failsFirst(k.(string)) {
					want = 2
				}
				require.Equal(t, want, v.(*atomic.Int64).Load(), "handler calls of %s", k)
				return true
			})
			require.Equal(t, items, n)
			sum, err := f.ledger(t, LedgerInline, "").(*InlineLedger).Summarize(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(items), sum.Done, fmt.Sprintf("%+v", sum))
			st, err := locks.GroupStatus(ctx, group)
			require.NoError(t, err)
			require.Equal(t, 3, st.N)
			for _, s := range st.Slots[:3] {
				require.True(t, s.Finished && s.Epoch == 1, "slot %d finished under epoch 1", s.Slot)
			}
		})
	}
}

// staleTake is a worker's client that resizes the group between its first acquisition round's
// read and its take (the take's write is held until the resize has landed), so the slot is taken
// under the plan that has just ended; it counts the checkpoint saves it forwards made under epoch 0.
type staleTake struct {
	DynamoDBClient
	oldSaves atomic.Int64
}

func newStaleTake(db ddbfault.Next, resize func()) *staleTake {
	fc := ddbfault.New(db)
	s := &staleTake{DynamoDBClient: workerClient(fc)}
	var once sync.Once
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		if _, take := in.ExpressionAttributeValues[":nonce"]; take {
			once.Do(resize)
		}
		if savesCheckpointOf(in, 0) {
			s.oldSaves.Add(1)
		}
		return send(ctx, in)
	}, ddbfault.OpUpdateItem)
	return s
}

// TestStaleEpochTakeWritesNothing: a worker joining a running group takes the free slot with a
// round that read the plan just before a resize 2 -> 3 landed, so its lease is of epoch 0. It must
// not work under that lease (no checkpoint of epoch 0, no item), take a slot under the new plan,
// and the job must end with every item handled once and the new plan's slots finished.
func TestStaleEpochTakeWritesNothing(t *testing.T) {
	const items = 600
	f := newFixture(t, items)
	ctx := context.Background()
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	group := f.table + "/default"
	var calls sync.Map
	release := make(chan struct{})
	h := func(_ context.Context, it Item) error {
		v, _ := calls.LoadOrStore(keyID(it.Key), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		return nil
	}
	// A holds a slot, slowly, until the joiner has taken the other one.
	slow := func(ctx context.Context, it Item) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return h(ctx, it)
	}
	config := func(owner string, workers int) Config {
		c := fastTimings(f.config(LedgerInline))
		c.Workers, c.Once, c.Owner, c.PageSize, c.Concurrency = workers, true, owner, 10, 2
		return c
	}
	var wg sync.WaitGroup
	acquiredA := make(chan struct{})
	ca := config("a", 2)
	var acquiredOnce sync.Once
	ca.Hooks.OnLease = func(e LeaseEvent) {
		if e.Kind == LeaseAcquired {
			acquiredOnce.Do(func() { close(acquiredA) })
		}
	}
	a, err := New(ca)
	require.NoError(t, err)
	// One slot is held (by nobody working) until A has the other one.
	idle, err := locks.AcquireSlot(ctx, group, 2, lock.WithGroupMeta(testGroupMeta(a.Config())))
	require.NoError(t, err)
	aDone := make(chan error, 1)
	wg.Go(func() { aDone <- runOnceWithin(t, a, slow, 120*time.Second) })
	select {
	case <-acquiredA:
	case err := <-aDone:
		t.Fatalf("A ended before taking a slot: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("A took no slot")
	}

	cx := config("x", 0)
	stale := newStaleTake(f.db, func() {
		_, err := Resize(context.Background(), locks, group, 3)
		require.NoError(t, err)
	})
	cx.Client = stale
	x, err := New(cx)
	require.NoError(t, err)
	require.NoError(t, idle.Release(ctx))
	wg.Go(func() { require.NoError(t, runOnceWithin(t, x, h, 120*time.Second)) })
	close(release)
	wg.Wait()
	require.NoError(t, <-aDone)

	require.Zero(t, stale.oldSaves.Load(), "the joiner saved a checkpoint under the stale plan")
	n := 0
	calls.Range(func(k, v any) bool {
		n++
		require.EqualValues(t, 1, v.(*atomic.Int64).Load(), "item %s", k)
		return true
	})
	require.Equal(t, items, n)
	st, err := locks.GroupStatus(ctx, group)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Epoch)
	for _, s := range st.Slots[:3] {
		require.True(t, s.Finished && s.Epoch == 1, "slot %d finished under epoch 1", s.Slot)
	}
}
