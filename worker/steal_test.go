package worker

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// newSkewedFixture is a table of n items whose filter-mode split over slots gives slot 0 three
// times the items of each other slot: attribute "p" maps the first 3/(slots+2) of the items to
// slot 0, and the rest evenly to the others.
func newSkewedFixture(t *testing.T, n, slots int) *fixture {
	f := newFixture(t, 0)
	big := 3 * n / (slots + 2)
	f.seed(t, 0, n, func(i int, it map[string]types.AttributeValue) {
		p := slots * i
		if i >= big {
			p += 1 + (i-big)*(slots-1)/(n-big)
		}
		it["p"] = &types.AttributeValueMemberN{Value: strconv.Itoa(p)}
	})
	return f
}

// shareOf is the slot whose share item it is (filter mode on "p").
func shareOf(it Item, slots int) int {
	p, _ := strconv.Atoi(it.Attrs["p"].(*types.AttributeValueMemberN).Value)
	return p % slots
}

func skewedConfig(f *fixture, owner string) Config {
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once, c.Owner = 3, true, owner
	c.Mode, c.PartitionAttr, c.Segments = scan.ModeFilter, "p", 24
	c.Concurrency = 4
	// Leases that survive a loaded machine's pauses: a lease lost mid-handler would be a
	// takeover, whose handlers in flight may run twice.
	c.LeaseTTL, c.Heartbeat, c.MaxClockSkew = 6*time.Second, time.Second, 200*time.Millisecond
	return c
}

// handledLog records every handler call: by item, which worker and which slot's share.
type handledLog struct {
	mu    sync.Mutex
	calls map[string]int
	// stolen counts items of slot 0's share handled by a worker while holding another slot.
	stolen int
}

func newHandledLog() *handledLog { return &handledLog{calls: map[string]int{}} }

func (l *handledLog) handler(delay time.Duration) Handler {
	return func(ctx context.Context, it Item) error {
		time.Sleep(delay)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls[keyID(it.Key)]++
		if shareOf(it, 3) == 0 && it.Slot != 0 {
			l.stolen++
		}
		return nil
	}
}

func (l *handledLog) requireOnce(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.calls, n, "every item handled")
	for id, c := range l.calls {
		require.Equal(t, 1, c, "item %s handled %d times", id, c)
	}
}

// runThree runs three once-workers of cfg at once and waits for all.
func runThree(t *testing.T, cfgs []Config, h Handler) []*Worker {
	t.Helper()
	var ws []*Worker
	for _, c := range cfgs {
		w, err := New(c)
		require.NoError(t, err)
		ws = append(ws, w)
	}
	errs := make(chan error, len(ws))
	for _, w := range ws {
		go func() { errs <- runOnceWithin(t, w, h, 120*time.Second) }()
	}
	for range ws {
		require.NoError(t, <-errs)
	}
	return ws
}

// TestStealingOnASkewedTable: filter mode, 3 slots, slot 0's share 3x the others', 20 ms
// handlers. With stealing, the workers whose slots finish first handle a good part of slot 0's
// items, and every item is handled exactly once (claim mode and complete-only, where the unit
// markers alone keep units exclusive); with NoSteal they handle none of them.
func TestStealingOnASkewedTable(t *testing.T) {
	for _, v := range []struct {
		name                  string
		noSteal, completeOnly bool
	}{{"steal", false, false}, {"steal-complete-only", false, true}, {"no-steal", true, false}} {
		t.Run(v.name, func(t *testing.T) {
			const n = 1500
			f := newSkewedFixture(t, n, 3)
			var cfgs []Config
			for i := range 3 {
				c := skewedConfig(f, "w"+strconv.Itoa(i))
				c.NoSteal, c.CompleteOnly = v.noSteal, v.completeOnly
				cfgs = append(cfgs, c)
			}
			log := newHandledLog()
			start := time.Now()
			ws := runThree(t, cfgs, log.handler(20*time.Millisecond))
			var stolenUnits int64
			for _, w := range ws {
				st := w.Stats()
				stolenUnits += st.Stolen
				t.Logf("%s: leases %d takeovers %d lost %d passes %d stolen %d completed %d skipped %d", w.Config().Owner, st.Leases, st.Takeovers, st.LeasesLost, st.Passes, st.Stolen, st.Completed, st.Skipped)
			}
			log.requireOnce(t, n)
			t.Logf("%s: %s, %d of slot 0's %d items handled by thieves (%d units)", v.name, time.Since(start).Round(time.Millisecond), log.stolen, n*3/5, stolenUnits)
			if v.noSteal {
				require.Zero(t, log.stolen, "NoSteal: nobody takes slot 0's items")
				require.Zero(t, stolenUnits)
				return
			}
			require.Greater(t, log.stolen, n*3/5/5, "thieves handle a good part of slot 0's share")
			// The slots' counts (what `dynapart status` shows) include the stolen items: each
			// owner adds its thieves' done, failed and scanned counts.
			locks, err := lock.New(f.db, f.leaseTable)
			require.NoError(t, err)
			st, err := locks.GroupStatus(context.Background(), ws[0].Config().Group)
			require.NoError(t, err)
			var counted, scanned int64
			for _, s := range st.Slots {
				sp, err := ParseSlotProgress(s.Checkpoint)
				require.NoError(t, err)
				counted += sp.Done
				scanned += sp.Scanned
			}
			require.Equal(t, int64(n), counted, "the slots' done counts add up to the table")
			require.Equal(t, int64(n), scanned, "the slots' scanned counts add up to the table")
			require.Positive(t, stolenUnits)
			finished, err := ws[0].JobFinished(context.Background())
			require.NoError(t, err)
			require.True(t, finished)
		})
	}
}

// crashTest is once-workers of a 2-slot filter-mode group on a skewed table (slot 0's share 3x
// slot 1's), each with its own client that its handler can crash. Which worker gets which slot is
// up to the lock, so handlers act by the slot they hold: on slot 0 a worker is the owner of the
// big share, on slot 1 reading slot 0's share it is a thief.
type crashTest struct {
	f       *fixture
	mu      sync.Mutex
	calls   map[string]int
	crashed map[string]bool // the items in the crashed worker's handlers at the crash
	crashes int
}

func newCrashTest(t *testing.T, n int) *crashTest {
	return &crashTest{f: newSkewedFixture(t, n, 2), calls: map[string]int{}, crashed: map[string]bool{}}
}

// crashWorker is one worker of a crashTest: its client and the items in its handlers.
type crashWorker struct {
	ct *crashTest
	db *crashable
	w  *Worker
	// inFlight are the items whose handler runs or has returned without the completion known to
	// have landed (guarded by ct.mu): a crash may leave any of them to be handled again.
	inFlight map[string]bool
}

func (ct *crashTest) worker(t *testing.T, owner string) *crashWorker {
	db := newCrashable(ct.f.db)
	c := skewedConfig(ct.f, owner)
	c.Client, c.Workers, c.ClaimTTL, c.Concurrency = db, 2, 3*time.Second, 2
	c.LeaseTTL, c.Heartbeat, c.MaxClockSkew = 3*time.Second, 500*time.Millisecond, 200*time.Millisecond
	cw := &crashWorker{ct: ct, db: db, inFlight: map[string]bool{}}
	c.Hooks.OnItem = func(e ItemEvent) {
		if e.Outcome == OutcomeCompleted {
			ct.mu.Lock()
			delete(cw.inFlight, keyID(e.Key))
			ct.mu.Unlock()
		}
	}
	w, err := New(c)
	require.NoError(t, err)
	cw.w = w
	return cw
}

// handler counts every call and runs act(it) while the item is in flight; act returns whether to
// crash the worker (at most one crash per test).
func (cw *crashWorker) handler(act func(Item) bool) Handler {
	ct := cw.ct
	return func(ctx context.Context, it Item) error {
		if cw.db.dead.Load() {
			return errCrashed // a dead process runs no more handlers
		}
		id := keyID(it.Key)
		ct.mu.Lock()
		ct.calls[id]++
		cw.inFlight[id] = true
		ct.mu.Unlock()
		crash := act(it)
		ct.mu.Lock()
		defer ct.mu.Unlock()
		if crash && ct.crashes == 0 {
			ct.crashes++
			for k := range cw.inFlight {
				ct.crashed[k] = true
			}
			cw.db.dead.Store(true)
		}
		return nil // the item leaves inFlight once its completion is reported (OnItem)
	}
}

// markers reads every unit marker of the lease table, of which there must be some.
func (ct *crashTest) markers(t *testing.T) []storedMarker {
	t.Helper()
	ms := unitMarkers(t, ct.f)
	require.NotEmpty(t, ms)
	return ms
}

// storedMarker is what these tests look at of a unit marker item (see lock.UnitMarker).
type storedMarker struct {
	Slot  int   `dynamodbav:"slot"`
	Token int64 `dynamodbav:"token"`
	Done  bool  `dynamodbav:"done"`
}

// unitMarkers reads every unit marker of f's lease table.
func unitMarkers(t *testing.T, f *fixture) []storedMarker {
	t.Helper()
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.leaseTable),
		FilterExpression:          aws.String("begins_with(pk, :units)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":units": &types.AttributeValueMemberS{Value: "units#"}}})
	require.NoError(t, err)
	require.Empty(t, out.LastEvaluatedKey)
	var ms []storedMarker
	require.NoError(t, attributevalue.UnmarshalListOfMaps(out.Items, &ms))
	return ms
}

// check requires every item done in the ledger and handled once, but for the items in the
// crashed worker's handlers at the crash, or handled and not yet completed then (the completion
// write fails after the crash), which may have been handled twice.
func (ct *crashTest) check(t *testing.T, n int) {
	t.Helper()
	ct.mu.Lock()
	defer ct.mu.Unlock()
	require.Equal(t, 1, ct.crashes, "a worker crashed")
	require.Len(t, ct.calls, n, "every item handled")
	for id, c := range ct.calls {
		if !ct.crashed[id] {
			require.Equal(t, 1, c, "item %s handled %d times", id, c)
		}
	}
	for i := range n {
		requireStatus(t, ct.f, LedgerInline, itemKey(i), StatusDone)
	}
}

// runCrashing runs a worker that may crash (a crashed worker's Run keeps retrying its calls as a
// standby would); stop cancels it and waits for Run to return.
func runCrashing(w *Worker, h Handler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx, h)
	}()
	return func() {
		cancel()
		<-done
	}
}

// TestStolenUnitOfADeadThief: a thief dies while reading a stolen unit (its calls start failing);
// the owner waits until the thief's lease has expired, takes the units it held back and reads
// them from the cursors the thief saved. Every item ends done; only the items in the thief's handlers at the
// crash may be handled twice.
func TestStolenUnitOfADeadThief(t *testing.T) {
	const n = 600
	ct := newCrashTest(t, n)
	var stolen atomic.Int64
	act := func(it Item) bool {
		switch {
		case it.Slot == 0:
			time.Sleep(30 * time.Millisecond) // the owner is slow
		case shareOf(it, 2) == 0: // a thief on a stolen unit
			return stolen.Add(1) == 5
		}
		return false
	}
	a, b := ct.worker(t, "a"), ct.worker(t, "b")
	stopA, stopB := runCrashing(a.w, a.handler(act)), runCrashing(b.w, b.handler(act))
	// The owner returns once its slot is finished; the crashed thief keeps retrying until stopped.
	require.Eventually(t, func() bool {
		ct.mu.Lock()
		defer ct.mu.Unlock()
		return ct.crashes == 1 && (a.w.Stats().State == StateFinished || b.w.Stats().State == StateFinished)
	}, 120*time.Second, 50*time.Millisecond)
	stopA()
	stopB()
	ct.check(t, n)
	taken := 0
	for _, m := range ct.markers(t) {
		if m.Slot == 0 && m.Done {
			taken++ // only a unit a thief left is marked done by its owner
		}
	}
	require.Positive(t, taken, "the owner took the dead thief's units back and read them")
}

// TestOwnerDiesWhileThievesHoldItsUnits: the owner of the big share dies (its calls start
// failing) while a thief reads its units; a standby takes the slot over, resumes the pass from
// the owner's checkpoint, finds the markers (its predecessor's to take over, the thief's to wait
// for) and completes the pass. Every item ends done; only the items in the owner's handlers at the
// crash may be handled twice.
func TestOwnerDiesWhileThievesHoldItsUnits(t *testing.T) {
	const n = 600
	ct := newCrashTest(t, n)
	stealing := make(chan struct{})
	var once sync.Once
	act := func(it Item) bool {
		if shareOf(it, 2) != 0 {
			return false
		}
		time.Sleep(15 * time.Millisecond)
		if it.Slot != 0 {
			once.Do(func() { close(stealing) })
			return false
		}
		select {
		case <-stealing:
			return true // the owner dies once a thief has begun
		default:
			return false
		}
	}
	a, b, standby := ct.worker(t, "a"), ct.worker(t, "b"), ct.worker(t, "standby")
	stopA, stopB := runCrashing(a.w, a.handler(act)), runCrashing(b.w, b.handler(act))
	// The standby joins once both slots are held, so it waits for one.
	require.Eventually(t, func() bool { return a.w.Stats().Slot >= 0 && b.w.Stats().Slot >= 0 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, runOnceWithin(t, standby.w, standby.handler(act), 120*time.Second))
	stopA()
	stopB()
	ct.check(t, n)
	var stolenUnits int64
	for _, cw := range []*crashWorker{a, b, standby} {
		stolenUnits += cw.w.Stats().Stolen
	}
	require.Positive(t, stolenUnits, "a thief read units of the owner's pass")
	tokens := map[int64]bool{}
	for _, m := range ct.markers(t) {
		if m.Slot == 0 {
			tokens[m.Token] = true
		}
	}
	require.GreaterOrEqual(t, len(tokens), 2, "the successor took over units its predecessor was reading (markers of two holders of slot 0)")
	finished, err := standby.w.JobFinished(context.Background())
	require.NoError(t, err)
	require.True(t, finished)
}

// TestStealingInSegmentAndIndexMode: the holder of slot 0 is slow (its handlers sleep, the
// others' do not); the other once-workers steal segments (segment mode: from the end of slot 0's
// block) or shards (index mode), and every item is handled exactly once.
func TestStealingInSegmentAndIndexMode(t *testing.T) {
	for _, mode := range []scan.Mode{scan.ModeSegment, scan.ModeIndex} {
		t.Run(string(mode), func(t *testing.T) {
			const n = 900
			f := newFixture(t, 0)
			var extra func(int, map[string]types.AttributeValue)
			if mode == scan.ModeIndex {
				require.NoError(t, scan.CreatePendingIndex(context.Background(), f.db, f.table, "dp_pending", "dp_shard"))
				extra = func(_ int, it map[string]types.AttributeValue) { scan.MarkPending(it, "id", "dp_shard", 48) }
			}
			f.seed(t, 0, n, extra)
			// Slot 0 must still have units not started when the others finish, on a loaded
			// machine too.
			delay := 100 * time.Millisecond
			var cfgs []Config
			for i := range 3 {
				c := skewedConfig(f, "w"+strconv.Itoa(i))
				// Small pages: a slot's readers run ahead of its handlers by whole pages
				// (MaxUnackedPages), so one-page segments would all be started at once.
				c.Mode, c.PartitionAttr, c.PageSize, c.Segments = mode, "", 10, 48
				if mode == scan.ModeIndex {
					c.Segments, c.Shards = 0, 48
				}
				if os.Getenv("STEAL_DEBUG") != "" {
					c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
				}
				cfgs = append(cfgs, c)
			}
			var mu sync.Mutex
			calls := map[string]int{}
			ws := runThree(t, cfgs, func(ctx context.Context, it Item) error {
				if it.Slot == 0 {
					time.Sleep(delay)
				}
				mu.Lock()
				defer mu.Unlock()
				calls[keyID(it.Key)]++
				return nil
			})
			require.Len(t, calls, n, "every item handled")
			for id, c := range calls {
				require.Equal(t, 1, c, "item %s handled %d times", id, c)
			}
			var stolen int64
			for _, w := range ws {
				stolen += w.Stats().Stolen
			}
			require.Positive(t, stolen, "units of the slow slot were stolen")
		})
	}
}

// TestOneSlotGroupWritesNoMarkers: units are stolen only among the slots of one plan, so the
// passes of a one-slot plan write no unit markers (and no pass-start checkpoint naming them). Its
// holder dies mid-pass (its calls start failing) and a standby resumes the pass from the slot's
// checkpoint alone: every item ends done, handled a second time only when the dead holder handled
// it and its completion did not land, the job finished, and the lease table holds no marker. Claim
// mode and complete-only.
func TestOneSlotGroupWritesNoMarkers(t *testing.T) {
	const n = 400
	for _, completeOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "claim", true: "complete-only"}[completeOnly], func(t *testing.T) {
			f := newFixture(t, n)
			comps := newCompletions()
			var mu sync.Mutex
			handledBy := map[string][]string{}
			var handled atomic.Int64
			newWorker := func(owner string) (*Worker, *crashable, Handler) {
				db := newCrashable(f.db)
				c := fastTimings(f.config(LedgerInline))
				c.Client, c.Owner, c.Workers, c.Once, c.CompleteOnly = db, owner, 1, true, completeOnly
				c.Concurrency, c.SubSegments, c.ClaimTTL = 2, 2, 3*time.Second
				c.LeaseTTL, c.Heartbeat, c.MaxClockSkew = 3*time.Second, 500*time.Millisecond, 200*time.Millisecond
				c.Hooks.OnItem = comps.hook(owner)
				w, err := New(c)
				require.NoError(t, err)
				return w, db, func(ctx context.Context, it Item) error {
					if db.dead.Load() {
						return errCrashed // a dead process runs no more handlers
					}
					mu.Lock()
					handledBy[keyID(it.Key)] = append(handledBy[keyID(it.Key)], owner)
					mu.Unlock()
					if handled.Add(1) == n/3 {
						db.dead.Store(true) // the holder dies with this item and any other in flight
					}
					return nil
				}
			}
			a, aDB, aH := newWorker("a")
			stopA := runCrashing(a, aH)
			require.Eventually(t, aDB.dead.Load, 60*time.Second, 20*time.Millisecond)
			b, _, bH := newWorker("b")
			require.NoError(t, runOnceWithin(t, b, bH, 120*time.Second))
			stopA()

			mu.Lock()
			defer mu.Unlock()
			comps.mu.Lock()
			defer comps.mu.Unlock()
			require.Len(t, handledBy, n, "every item handled")
			for id, by := range handledBy {
				if len(by) > 1 {
					require.Equal(t, []string{"a", "b"}, by, "item %s", id)
					require.NotContains(t, comps.by[id], "a", "item %s: completed by the dead holder, then handled again", id)
				}
				require.Len(t, comps.by[id], 1, "item %s completed once", id)
			}
			for i := range n {
				requireStatus(t, f, LedgerInline, itemKey(i), StatusDone)
			}
			require.Positive(t, b.Stats().Completed, "the standby resumed the pass")
			finished, err := b.JobFinished(context.Background())
			require.NoError(t, err)
			require.True(t, finished)
			require.Zero(t, len(unitMarkers(t, f)), "a one-slot plan writes no unit markers")
		})
	}
}
