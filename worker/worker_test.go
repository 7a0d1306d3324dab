package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// fastTimings keep a multi-worker test short on the real clock: a dead worker's slot is taken
// over after about 1.5 s.
func fastTimings(c Config) Config {
	c.LeaseTTL = 1500 * time.Millisecond
	c.Heartbeat = 300 * time.Millisecond
	c.MaxClockSkew = 100 * time.Millisecond
	c.StandbyPoll = 100 * time.Millisecond
	c.CheckpointInterval = 100 * time.Millisecond
	c.PollInterval = 200 * time.Millisecond
	c.RetryBackoff = 20 * time.Millisecond
	c.DrainTimeout = 2 * time.Second
	return c
}

// TestExactlyOnce runs 5 workers (N = 4 plus a standby) on 5,000 items. One worker crashes (its
// DynamoDB calls start failing: its lease and claims are abandoned without release), another is
// cancelled midway and replaced. Every item must end done, completed once, and only items that
// were in flight at the crash may need a second attempt.
func TestExactlyOnce(t *testing.T) {
	variants := []struct {
		kind  LedgerKind
		batch bool
	}{{LedgerInline, false}, {LedgerTable, false}, {LedgerTable, true}, {LedgerInline, true}}
	for _, v := range variants {
		kind := v.kind
		name := string(kind)
		if v.batch {
			name += "-batched"
		}
		t.Run(name, func(t *testing.T) {
			const items = 5000
			f := newFixture(t, items)
			comp := newCompletions()
			crashAt, cancelAt := make(chan struct{}), make(chan struct{})
			var once1, once2 sync.Once
			var startedMu sync.Mutex
			started := map[string][]string{}
			// The completions whose write got no answer (the worker's lease ended while it was in
			// flight, under load): they may have landed without a completed event.
			type unknownKey struct {
				id, owner string
				attempt   int
			}
			unknown := map[unknownKey]bool{}
			lostLease := map[string]bool{} // owners whose lease expired under load (not the crash)

			ctx, cancelAll := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancelAll()
			cancels := map[string]context.CancelFunc{}

			owners := []string{"w0", "w1", "w2", "w3", "w4"}
			clients := map[string]*crashable{}
			workers := map[string]*Worker{}
			var crashedOwner atomic.Value // the owner whose client is dead
			handler := func(owner string) Handler {
				return func(hctx context.Context, it Item) error {
					if clients[owner].dead.Load() {
						<-hctx.Done() // a dead process never finishes
						return hctx.Err()
					}
					time.Sleep(200 * time.Microsecond) // simulated work keeps items in flight
					return nil
				}
			}
			newW := func(owner string) *Worker {
				clients[owner] = newCrashable(f.db)
				c := fastTimings(f.config(kind))
				c.Client, c.Owner, c.Workers, c.Once, c.Concurrency = clients[owner], owner, 4, true, 8
				c.BatchClaims = v.batch
				c.ClaimTTL = time.Minute // reclaims must come from the lease token rule, not the claim TTL
				c.Hooks.OnLease = func(e LeaseEvent) {
					if e.Kind == LeaseLost {
						startedMu.Lock()
						lostLease[owner] = true
						startedMu.Unlock()
					}
				}
				c.Hooks.OnItem = func(e ItemEvent) {
					if e.Outcome == OutcomeClaimed {
						startedMu.Lock()
						started[owner] = append(started[owner], keyID(e.Key))
						startedMu.Unlock()
					}
					if e.Outcome == OutcomeUnknown {
						startedMu.Lock()
						unknown[unknownKey{keyID(e.Key), owner, e.Attempt}] = true
						startedMu.Unlock()
					}
					comp.hook(owner)(e)
					if n := comp.total.Load(); n >= 1000 {
						once1.Do(func() { close(crashAt) })
					}
					if n := comp.total.Load(); n >= 2000 {
						once2.Do(func() { close(cancelAt) })
					}
				}
				w, err := New(c)
				require.NoError(t, err)
				workers[owner] = w
				return w
			}
			for _, o := range append(owners, "w5") {
				newW(o)
			}

			type result struct {
				owner string
				err   error
			}
			results := make(chan result, 8)
			run := func(owner string) {
				w := workers[owner]
				wctx, cancel := context.WithCancel(ctx)
				cancels[owner] = cancel
				go func() { results <- result{owner, w.Run(wctx, handler(owner))} }()
			}
			for _, o := range owners {
				run(o)
			}
			<-crashAt
			// Crash a worker that holds a slot: its DynamoDB calls fail from now on.
			for _, o := range owners {
				if workers[o].Stats().State == "working" {
					clients[o].dead.Store(true)
					crashedOwner.Store(o)
					break
				}
			}
			require.NotNil(t, crashedOwner.Load())
			crashed := crashedOwner.Load().(string)
			<-cancelAt
			// Cancel another slot holder gracefully; a replacement takes its slot, as a scheduler
			// would restart it.
			cancelled := ""
			for _, o := range owners {
				if o != crashed && workers[o].Stats().State == "working" {
					cancelled = o
					break
				}
			}
			require.NotEmpty(t, cancelled)
			cancels[cancelled]()
			run("w5")

			// Every worker but the crashed one returns by itself: the job is done. The crashed one
			// waits for DynamoDB to come back, as a worker does through an outage, until stopped.
			got := map[string]error{}
			for range 5 {
				r := <-results
				require.NotEqual(t, crashed, r.owner, "the crashed worker must keep waiting, got %v", r.err)
				got[r.owner] = r.err
			}
			cancels[crashed]()
			r := <-results
			require.Equal(t, crashed, r.owner)
			got[crashed] = r.err
			require.ErrorIs(t, got[cancelled], context.Canceled)
			require.ErrorIs(t, got[crashed], context.Canceled)
			for o, err := range got {
				if o != crashed && o != cancelled {
					require.NoError(t, err, o)
				}
			}
			startedByCrashed := map[string]bool{}
			for _, id := range started[crashed] {
				startedByCrashed[id] = true
			}

			led := f.ledger(t, kind, "")
			sum, err := led.Summarize(ctx)
			require.NoError(t, err)
			require.Equal(t, Summary{Total: items, Done: items}, sum)
			comp.mu.Lock()
			defer comp.mu.Unlock()
			wroteAfterLoss := func(id string) bool {
				for o := range lostLease {
					if clients[o].wrote(id) {
						return true
					}
				}
				return false
			}
			retried, retriedCrashed, unanswered := 0, 0, 0
			for i := range items {
				id := itemKey(i)
				st, err := led.State(ctx, skey(id))
				require.NoError(t, err)
				require.Equal(t, StatusDone, st.Status)
				if len(comp.by[id]) == 0 && unknown[unknownKey{id, st.Owner, st.Attempts}] {
					unanswered++ // done by the attempt whose completion got no answer: once
					continue
				}
				require.Len(t, comp.by[id], 1, "item %s completed by %v (state %+v)", id, comp.by[id], st)
				if st.Attempts > 1 {
					retried++
					// A second attempt only for items the crashed or the cancelled worker, or one
					// whose lease expired under load, had written (claimed, or tried to).
					if !clients[crashed].wrote(id) && !clients[cancelled].wrote(id) && !wroteAfterLoss(id) {
						t.Fatalf("item %s took %d attempts but neither the crashed (%s) nor the cancelled (%s) worker, nor one that lost its lease (%v), touched it (state %+v)",
							id, st.Attempts, crashed, cancelled, lostLease, st)
					}
					if startedByCrashed[id] {
						retriedCrashed++
					}
				}
			}
			// Every item the crashed worker had claimed and not completed was reclaimed and finished
			// by another worker, with a later attempt.
			inFlight := 0
			for id := range startedByCrashed {
				if len(comp.by[id]) == 1 && comp.by[id][0] != crashed {
					inFlight++
					st, err := led.State(ctx, skey(id))
					require.NoError(t, err)
					require.GreaterOrEqual(t, st.Attempts, 2, "item %s was in flight at the crash", id)
				}
			}
			t.Logf("in flight at the crash: %d items, reclaimed: %d; items with more than one attempt: %d; done by a completion that got no answer: %d",
				inFlight, retriedCrashed, retried, unanswered)
		})
	}
}

// TestStaleWorkerCannotComplete freezes a handler past its claim TTL; another worker reclaims the
// item; the frozen worker's completion is refused and the item's final state is the second's.
func TestStaleWorkerCannotComplete(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 1)
			clk := newTestClock()
			c := f.config(kind)
			c.Workers, c.Once, c.Owner, c.Clock = 1, true, "frozen", clk
			c.ClaimTTL = 2 * time.Second
			c.LeaseTTL, c.Heartbeat = time.Hour, 10*time.Minute
			var lost []ItemEvent
			var mu sync.Mutex
			c.Hooks.OnItem = func(e ItemEvent) {
				if e.Outcome != OutcomeClaimed {
					mu.Lock()
					lost = append(lost, e)
					mu.Unlock()
				}
			}
			w, err := New(c)
			require.NoError(t, err)

			started, release := make(chan Item, 1), make(chan struct{})
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				done <- w.Run(ctx, func(hctx context.Context, it Item) error {
					started <- it
					<-release // frozen: ignores its context
					return nil
				})
			}()
			it := <-started
			clk.Advance(3 * time.Second) // past the claim TTL

			// Another worker reclaims the expired claim and completes it.
			led := f.ledger(t, kind, "")
			now := clk.Now()
			outs, err := led.Claim(ctx, []ClaimRequest{{Key: it.Key, Owner: "second", Slot: 0, Token: it.Token, Now: now, Until: now.Add(time.Minute)}})
			require.NoError(t, err)
			require.True(t, outs[0].Claimed)
			require.NoError(t, led.Complete(ctx, outs[0].Claim, now))

			close(release) // the frozen handler returns nil and tries to complete
			require.NoError(t, <-done)
			st, err := led.State(ctx, it.Key)
			require.NoError(t, err)
			require.Equal(t, StatusDone, st.Status)
			require.Equal(t, "second", st.Owner)
			require.Equal(t, 2, st.Attempts)
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, lost)
			require.Equal(t, OutcomeClaimLost, lost[0].Outcome)
			require.EqualValues(t, 1, w.Stats().ClaimLost)
			require.Zero(t, w.Stats().Completed)
		})
	}
}

// TestHandlerOutcomes checks each documented end state: retries with backoff, dead letters after
// MaxAttempts, Permanent, RetryAfter and panics.
func TestHandlerOutcomes(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, 5)
			c := fastTimings(f.config(kind))
			c.Workers, c.Once, c.MaxAttempts = 1, true, 3
			w, err := New(c)
			require.NoError(t, err)
			var mu sync.Mutex
			calls := map[string]int{}
			errBoom := errors.New("boom")
			err = w.Run(context.Background(), func(_ context.Context, it Item) error {
				id := keyID(it.Key)
				mu.Lock()
				calls[id]++
				n := calls[id]
				mu.Unlock()
				require.Equal(t, n, it.Attempt, "attempt numbers count claims")
				switch id {
				case itemKey(0): // fails twice, then succeeds
					if n < 3 {
						return errBoom
					}
					return nil
				case itemKey(1): // always fails: dead-lettered after MaxAttempts
					return fmt.Errorf("attempt %d: %w", n, errBoom)
				case itemKey(2): // permanent: dead-lettered at once
					return Permanent(errBoom)
				case itemKey(3): // panics once, then succeeds
					if n == 1 {
						panic("kaboom")
					}
					return nil
				case itemKey(4): // asks for a later retry once
					if n == 1 {
						return RetryAfter(errBoom, 50*time.Millisecond)
					}
					return nil
				}
				return nil
			})
			require.NoError(t, err)

			led := f.ledger(t, kind, "")
			state := func(i int) ItemState {
				st, err := led.State(context.Background(), skey(itemKey(i)))
				require.NoError(t, err)
				return st
			}
			require.Equal(t, StatusDone, state(0).Status)
			require.Equal(t, 3, state(0).Attempts)
			require.Equal(t, StatusFailed, state(1).Status)
			require.Equal(t, 3, state(1).Attempts)
			require.Contains(t, state(1).Error, "attempt 3")
			require.Equal(t, StatusFailed, state(2).Status)
			require.Equal(t, 1, state(2).Attempts)
			require.Equal(t, StatusDone, state(3).Status)
			require.Equal(t, 2, state(3).Attempts)
			require.Equal(t, StatusDone, state(4).Status)
			require.Equal(t, 2, state(4).Attempts)

			var dead []string
			require.NoError(t, led.DeadLetters(context.Background(), func(d DeadLetter) error {
				dead = append(dead, keyID(d.Key))
				return nil
			}))
			require.ElementsMatch(t, []string{itemKey(1), itemKey(2)}, dead)
			s := w.Stats()
			require.EqualValues(t, 3, s.Completed)
			require.EqualValues(t, 2, s.DeadLettered)
			require.EqualValues(t, 1, s.Panics)
			require.EqualValues(t, 6, s.Retried) // item 0 twice, item 1 twice, item 3 once, item 4 once
		})
	}
}

// TestWrongNIsRefused: a worker started with another N for the same group gets an error naming
// both values and writes nothing.
func TestWrongNIsRefused(t *testing.T) {
	f := newFixture(t, 10)
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once = 2, true
	w, err := New(c)
	require.NoError(t, err)
	require.NoError(t, w.Run(context.Background(), func(context.Context, Item) error { return nil }))

	c.Workers = 3
	w3, err := New(c)
	require.NoError(t, err)
	err = w3.Run(context.Background(), func(context.Context, Item) error { return nil })
	require.ErrorIs(t, err, lock.ErrGroupMismatch)
	var gm *lock.GroupMismatchError
	require.ErrorAs(t, err, &gm)
	require.Zero(t, w3.Stats().Scanned)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	f := &fixture{}
	base := Config{Client: &crashable{}, Table: "t", Workers: 2}
	cases := map[string]func(c *Config){
		"Client":      func(c *Config) { c.Client = nil },
		"Table":       func(c *Config) { c.Table = "" },
		"Workers":     func(c *Config) { c.Workers = -1 },
		"Segments":    func(c *Config) { c.Workers, c.Segments = 8, 4 },
		"LeaseTTL":    func(c *Config) { c.LeaseTTL, c.Heartbeat = time.Second, time.Second },
		"Mode":        func(c *Config) { c.Mode = "sideways" },
		"Ledger":      func(c *Config) { c.Ledger = "paper" },
		"Concurrency": func(c *Config) { c.Concurrency = -1 },
		"MaxAttempts": func(c *Config) { c.MaxAttempts = -1 },
		"Shards":      func(c *Config) { c.Mode, c.Shards, c.Workers = scan.ModeIndex, 2, 4 },
		"BatchClaims": func(c *Config) { c.BatchClaims, c.CompleteOnly = true, true },
	}
	_ = f
	for field, mutate := range cases {
		t.Run(field, func(t *testing.T) {
			c := base
			mutate(&c)
			_, err := New(c)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, field, ce.Field)
		})
	}
}

func TestMissingTableIsAConfigError(t *testing.T) {
	f := newFixture(t, 0)
	c := f.config(LedgerInline)
	c.Table, c.Workers = "no-such-table", 2
	w, err := New(c)
	require.NoError(t, err)
	err = w.Run(context.Background(), func(context.Context, Item) error { return nil })
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Table", ce.Field)
}

// blockingReads is a worker's client with nothing behind it whose reads wait until their context
// ends, so a Run stays in its preparation (whose reads go out together: entered is closed by the
// first).
func blockingReads(entered chan struct{}) DynamoDBClient {
	fc := ddbfault.New(nil)
	var once sync.Once
	fc.OnCall(func(ctx context.Context, _ ddbfault.Call, _ ddbfault.Send) (any, error) {
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return nil, ctx.Err()
	}, ddbfault.OpDescribeTable, ddbfault.OpGetItem, ddbfault.OpQuery)
	return workerClient(fc)
}

// A second Run while one is running returns ErrRunTwice at once, without touching DynamoDB.
func TestRunTwiceIsASentinel(t *testing.T) {
	entered := make(chan struct{})
	w, err := New(Config{Client: blockingReads(entered), Table: "t", Workers: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- w.Run(ctx, func(context.Context, Item) error { return nil }) }()
	<-entered
	require.ErrorIs(t, w.Run(ctx, func(context.Context, Item) error { return nil }), ErrRunTwice)
	cancel()
	require.ErrorIs(t, <-first, context.Canceled)
}

// lock, scan and worker report invalid configuration with one error type.
func TestOneConfigErrorShape(t *testing.T) {
	_, werr := New(Config{Table: "t", Workers: 1})
	_, serr := scan.New(scan.Config{})
	_, lerr := lock.New(nil, "")
	for _, err := range []error{werr, serr, lerr} {
		var ce *lock.ConfigError
		require.ErrorAs(t, err, &ce, "%T %v", err, err)
		require.NotEmpty(t, ce.Field)
		require.NotEmpty(t, ce.Pkg)
	}
}
