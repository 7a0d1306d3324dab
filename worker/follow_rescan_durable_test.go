package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/lock"
)

// A rescan whose loss left no other trace (judged by time) is kept on the slot's lease: these
// tests come from a review of 7734741..c158e6c, which reproduced each hole before the fix.

// slotCheckpointOf reads slot 0's checkpoint of w's group.
func slotCheckpointOf(t *testing.T, f *fixture, group string) string {
	t.Helper()
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	gs, err := locks.GroupStatus(context.Background(), group)
	require.NoError(t, err)
	return gs.Slots[0].Checkpoint
}

// TestDirtyRescanKeepsItsMark: a rescan whose loss left no other trace (judged by time: the
// slot's previous holder was last alive longer ago than the retention) ends dirty (its read of the
// changed item X failed: "another pass"). The next pass's checkpoint used to drop rescanMark: a
// holder stopped during the wait for it left "resume a pass of the share", and the next holder
// (its previous holder alive a moment ago) ran a plain pass, which with the table ledger renews
// nothing, and followed: X's new version was never handled. Now the next pass says rescan too.
func TestDirtyRescanKeepsItsMark(t *testing.T) {
	d := groupWentDown(t, LedgerTable, 2*time.Second)
	f, x, runs, streams, h, group := d.f, d.x, d.runs, d.streams, d.handler, d.group

	// B rescans (time-judged); its read of X fails once: the rescan is dirty.
	var failed atomic.Bool
	fc := ddbfault.New(f.db)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.GetItemInput)
		if aws.ToString(in.TableName) == f.table {
			if id, ok := in.Key["id"].(*types.AttributeValueMemberS); ok && id.Value == x && failed.CompareAndSwap(false, true) {
				return nil, errTransient
			}
		}
		return send(ctx, call.In)
	}, ddbfault.OpGetItem)
	b := startReview(t, f, LedgerTable, "B", streams, func(c *Config) {
		c.Client = workerClient(fc)
		c.PollInterval = 30 * time.Second
	}, h("B"))
	reviewWait(t, 30*time.Second, func() (bool, string) {
		return b.Stats().Passes >= 1 && failed.Load(), fmt.Sprintf("B's dirty rescan: %+v", b.Stats())
	})
	liftShortRetention()
	time.Sleep(500 * time.Millisecond)
	cp := slotCheckpointOf(t, f, group)
	t.Logf("B's checkpoint while it waits for its next pass: %q (rescans %d)", cp, b.Stats().Follow.Rescans)
	b.stop()
	cp = slotCheckpointOf(t, f, group)
	t.Logf("checkpoint left by B: %q", cp)

	c := startReview(t, f, LedgerTable, "C", streams, nil, h("C"))
	reviewWait(t, 30*time.Second, func() (bool, string) { return c.Stats().Passes >= 1, "C's first pass" })
	f.seed(t, 3, 1, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(3))) == 1, "C follows" })
	reviewWait(t, 10*time.Second, func() (bool, string) {
		ok, why := reviewDoneAtCurrent(t, f, LedgerTable, x)
		return ok, fmt.Sprintf("%s; runs %v; B's checkpoint %q; C's follow %+v (rescans %d)", why, runs.of(x),
			cp, *c.Stats().Follow, c.Stats().Follow.Rescans)
	})
}

// TestResizeKeepsARescan: a resize while a slot rescans the whole table (its checkpoint says
// rescanMark) used to compose the new plan's checkpoints from the group's (planSources), which
// leave the rescanning slot's out: plain passes of the new slots, which with the table ledger
// renew no changed item, and a change whose record the stream lost (judged by time) was never
// handled. Now a slot taken under a new plan of a group that was rescanning rescans
// (slot.groupRescans).
func TestResizeKeepsARescan(t *testing.T) {
	d := groupWentDown(t, LedgerTable, 2*time.Second)
	ctx, f, x, runs, streams, h, group := context.Background(), d.f, d.x, d.runs, d.streams, d.handler, d.group
	z := itemKey(9)
	f.seed(t, 9, 1, nil) // a new item: B's rescan holds on it

	var failed atomic.Bool
	fc := ddbfault.New(f.db)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.GetItemInput)
		if aws.ToString(in.TableName) == f.table {
			if id, ok := in.Key["id"].(*types.AttributeValueMemberS); ok && id.Value == x && failed.CompareAndSwap(false, true) {
				return nil, errTransient // B's rescan does not get to renew X before the resize
			}
		}
		return send(ctx, call.In)
	}, ddbfault.OpGetItem)
	var holding atomic.Bool
	b := startReview(t, f, LedgerTable, "B", streams, func(c *Config) {
		c.Client = workerClient(fc)
		c.HandlerGrace = 100 * time.Millisecond
	}, func(ctx context.Context, it Item) error {
		if keyID(it.Key) == z && holding.CompareAndSwap(false, true) {
			<-ctx.Done()
			return ctx.Err()
		}
		runs.add("B", it, false)
		return nil
	})
	reviewWait(t, 30*time.Second, func() (bool, string) {
		cp := slotCheckpointOf(t, f, group)
		return holding.Load() && failed.Load() && strings.HasSuffix(cp, "|rescan"), "B rescanning: " + cp
	})
	liftShortRetention()
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = Resize(ctx, locks, group, 2)
	require.NoError(t, err)
	c := startReview(t, f, LedgerTable, "C", streams, func(c *Config) { c.Workers = 0 }, h("C"))
	reviewWait(t, 30*time.Second, func() (bool, string) {
		return len(runs.of(z)) == 1, fmt.Sprintf("Z handled after the resize: %v", runs.of(z))
	})
	f.seed(t, 3, 1, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(3))) == 1, "the new plan follows" })
	reviewWait(t, 10*time.Second, func() (bool, string) {
		ok, why := reviewDoneAtCurrent(t, f, LedgerTable, x)
		return ok, fmt.Sprintf("%s; runs %v; rescans B %d C %d", why, runs.of(x), b.Stats().Follow.Rescans, c.Stats().Follow.Rescans)
	})
}

// TestTwoFollowersSwitchUnderSteadyWrites: a group of two under steady writes. Once one slot
// follows, its follower moves the states of the other slot's items while that slot's pass runs: a
// pass renew refused (afterRefusedRenew) that finds the item finished at an older version than
// its content asks for another pass, as does an item claimed by the follower. The second slot
// still switches to the stream.
func TestTwoFollowersSwitchUnderSteadyWrites(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const seeded = 300
	f := newFixture(t, seeded)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	var refused, renews atomic.Int64
	fc := ddbfault.New(f.db)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		out, err := send(ctx, call.In)
		if _, isRenew := in.ExpressionAttributeValues[":prev"]; isRenew {
			renews.Add(1)
			var cf *types.ConditionalCheckFailedException
			if errors.As(err, &cf) {
				refused.Add(1)
			}
		}
		return out, err
	}, ddbfault.OpUpdateItem)
	ws := map[string]*Worker{}
	for _, name := range []string{"A", "B"} {
		cfg := f.config(LedgerInline)
		cfg.Owner, cfg.Workers, cfg.Follow, cfg.Streams, cfg.Concurrency = name, 2, true, newReviewStreams(t, true, 0), 8
		cfg.Client = workerClient(fc)
		cfg.StreamPoll, cfg.PollInterval = 50*time.Millisecond, 100*time.Millisecond
		w, err := New(cfg)
		require.NoError(t, err)
		ws[name] = w
		if name == "B" {
			time.Sleep(3 * time.Second) // A's pass first: A follows while B's pass runs
		}
		go func() {
			_ = w.Run(ctx, func(context.Context, Item) error { time.Sleep(5 * time.Millisecond); return nil })
		}()
	}
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	stop := make(chan struct{})
	var writes atomic.Int64
	go func() {
		i := 0
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			i = (i*7919 + 13) % seeded
			_, _ = f.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
				TableName: aws.String(f.table), Key: skey(itemKey(i)), UpdateExpression: aws.String("SET n = :n"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: fmt.Sprint(1_000_000 + int(writes.Add(1)))}},
			})
		}
	}()
	defer close(stop)
	deadline := time.Now().Add(45 * time.Second)
	for {
		gs, err := locks.GroupStatus(ctx, ws["A"].Config().Group)
		require.NoError(t, err)
		following := 0
		for _, s := range gs.Slots {
			if strings.HasSuffix(s.Checkpoint, "|follow") {
				following++
			}
		}
		if following == 2 {
			t.Logf("both follow: passes A %d B %d; renews %d refused %d; writes %d", ws["A"].Stats().Passes, ws["B"].Stats().Passes, renews.Load(), refused.Load(), writes.Load())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 45s %d of 2 slots follow: passes A %d B %d; renews %d refused %d; writes %d", following,
				ws["A"].Stats().Passes, ws["B"].Stats().Passes, renews.Load(), refused.Load(), writes.Load())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCrashBeforeRescanIsSaved: a slot whose previous holder was last alive longer ago than the
// retention rescans (outlivedRetention(PreviousExpiry)), but used to do so only in memory: the
// lease held the previous holder's follow checkpoint until the rescan pass's first save. A holder
// that died in that window (modelled: its scan hangs and its lease writes fail from the first Scan
// of its rescan) handed the next holder a follow checkpoint and a PreviousExpiry of a moment ago:
// it followed without rescanning. Now the rescan is saved on the lease before it starts.
func TestCrashBeforeRescanIsSaved(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			d := groupWentDown(t, kind, 8*time.Second)
			f, x, runs, streams, h, group := d.f, d.x, d.runs, d.streams, d.handler, d.group

			var dead atomic.Bool
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				if in, ok := call.In.(*dynamodb.ScanInput); ok && aws.ToString(in.TableName) == f.table && dead.CompareAndSwap(false, true) {
					<-ctx.Done() // B dies here: its rescan's first page never comes
					return nil, ctx.Err()
				}
				if dead.Load() {
					return nil, errTransient // dead: nothing B sends lands any more
				}
				return send(ctx, call.In)
			})
			b := startReview(t, f, kind, "B", streams, func(c *Config) { c.Client = workerClient(fc) }, h("B"))
			reviewWait(t, 30*time.Second, func() (bool, string) {
				fs := b.Stats().Follow
				return dead.Load() && fs != nil && fs.Rescans == 1, "B decided to rescan and died"
			})
			liftShortRetention()
			cp := slotCheckpointOf(t, f, group)
			t.Logf("the lease's checkpoint when B died: %q", cp)
			time.Sleep(3*time.Second + 500*time.Millisecond) // B's lease expires
			c := startReview(t, f, kind, "C", streams, nil, h("C"))
			f.seed(t, 3, 1, nil)
			reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(3))) == 1, "C follows" })
			reviewWait(t, 10*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, kind, x)
				return ok, fmt.Sprintf("%s; runs %v; checkpoint B left %q; C's rescans %d", why, runs.of(x), cp, c.Stats().Follow.Rescans)
			})
			t.Logf("runs of X %v; rescans B %d C %d; calls %v", runs.of(x), b.Stats().Follow.Rescans, c.Stats().Follow.Rescans, fc.CallsByOp())
		})
	}
}

// TestRescanSaveFailsThenRetake: a group down longer than the retention; B takes slot 0, judges
// that it must rescan, and startRescan's save of the rescan mark fails once (DynamoDB briefly out
// of reach): the slot ends and Run takes a slot again. B used to judge by the lease's previous
// expiry, which its own first take had just written: it followed without a rescan, and X's change
// (its record lost) was never handled. Now the follow checkpoint says how far the group had read
// the stream (keepFollowing), which a take does not change.
func TestRescanSaveFailsThenRetake(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			d := groupWentDown(t, kind, 2*time.Second)
			f, x, runs, streams, h := d.f, d.x, d.runs, d.streams, d.handler

			var failed atomic.Bool
			fc := ddbfault.New(f.db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.UpdateItemInput)
				if aws.ToString(in.TableName) == f.leaseTable {
					if v, ok := in.ExpressionAttributeValues[":cp"].(*types.AttributeValueMemberS); ok &&
						strings.HasSuffix(v.Value, "|rescan") && failed.CompareAndSwap(false, true) {
						return nil, errTransient
					}
				}
				return send(ctx, call.In)
			}, ddbfault.OpUpdateItem)
			b := startReview(t, f, kind, "B", streams, func(c *Config) { c.Client = workerClient(fc) }, h("B"))
			reviewWait(t, 30*time.Second, func() (bool, string) { return failed.Load(), "B's rescan save failed" })
			// B's pass after its retake: its judgement of the time is made.
			reviewWait(t, 30*time.Second, func() (bool, string) { return b.Stats().Passes >= 1, "B's pass after the retake" })
			liftShortRetention()
			f.seed(t, 3, 1, nil)
			reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(3))) == 1, "B follows" })
			reviewWait(t, 10*time.Second, func() (bool, string) {
				ok, why := reviewDoneAtCurrent(t, f, kind, x)
				return ok, fmt.Sprintf("%s; runs %v; B's rescans %d leases %d; checkpoint %q", why, runs.of(x),
					b.Stats().Follow.Rescans, b.Stats().Leases, slotCheckpointOf(t, f, d.group))
			})
		})
	}
}

// TestDirtyLongPassKeepsItsStart: TestFirstPassOutlastsRetention with the long first pass ending
// dirty (its slow item fails once). The next pass used to start with no since, so the clean pass
// after it was judged by its own recent start: no rescan, and with the table ledger (a plain pass
// renews nothing) X's change made during the long pass was never handled. Now a dirty pass's
// since carries over.
func TestDirtyLongPassKeepsItsStart(t *testing.T) {
	shortRetention(t, 2*time.Second)
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	f.seed(t, 0, 3, nil)
	x := itemKey(0)
	gate := make(chan struct{})
	var failedOnce atomic.Bool
	runs := newReviewRuns()
	streams := &dropStreams{reviewStreams: newReviewStreams(t, true, 0), id: x}
	w := startReview(t, f, LedgerTable, "A", streams, func(c *Config) { c.Concurrency = 4; c.PollInterval = 200 * time.Millisecond },
		func(ctx context.Context, it Item) error {
			runs.add("A", it, false)
			if keyID(it.Key) == itemKey(2) && failedOnce.CompareAndSwap(false, true) {
				select { // a slow item: the first pass lasts longer than the retention, and ends dirty
				case <-gate:
				case <-ctx.Done():
					return ctx.Err()
				}
				return errors.New("test: fails once")
			}
			return nil
		})
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(x)) == 1, "the pass handled item 0" })
	setN(t, f, 0, 1000)
	streams.drop.Store("all")
	time.Sleep(2 * time.Second)
	close(gate)
	streams.following(t)
	f.seed(t, 3, 1, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(3))) == 1, "following" })
	reviewWait(t, 10*time.Second, func() (bool, string) {
		ok, why := reviewDoneAtCurrent(t, f, LedgerTable, x)
		return ok, fmt.Sprintf("%s; runs %v; passes %d follow %+v", why, runs.of(x), w.Stats().Passes, *w.Stats().Follow)
	})
}

// TestResizeKeepsALongPassStart: TestFirstPassOutlastsRetention with a resize during the long
// first pass. adoptPlan used to compose the new plan's checkpoints with no since: the new slots'
// passes were judged by their own recent starts, nobody rescanned, and X's change made during the
// long pass was never handled. Now the new plan's slots judge from the old plan's earliest since.
func TestResizeKeepsALongPassStart(t *testing.T) {
	shortRetention(t, 2*time.Second)
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	f.seed(t, 0, 3, nil)
	x := itemKey(0)
	var first atomic.Bool
	runs := newReviewRuns()
	streams := &dropStreams{reviewStreams: newReviewStreams(t, true, 0), id: x}
	h := func(by string) Handler {
		return func(ctx context.Context, it Item) error {
			runs.add(by, it, false)
			if keyID(it.Key) == itemKey(2) && by == "A" && first.CompareAndSwap(false, true) {
				<-ctx.Done() // held until the resize stops A's pass
				return ctx.Err()
			}
			return nil
		}
	}
	a := startReview(t, f, LedgerTable, "A", streams, func(c *Config) {
		c.Concurrency, c.HandlerGrace, c.PollInterval = 4, 100*time.Millisecond, time.Second
	}, h("A"))
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(x)) == 1, "the pass handled item 0" })
	setN(t, f, 0, 1000)
	streams.drop.Store("all")
	time.Sleep(2 * time.Second) // the first pass outlasts the retention
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = Resize(ctx, locks, a.Config().Group, 2)
	require.NoError(t, err)
	// The passes after the resize are dirty until A's abandoned claim of item 2 expires (ClaimTTL).
	c := startReview(t, f, LedgerTable, "C", streams, func(c *Config) { c.Workers, c.PollInterval = 0, time.Second }, h("C"))
	f.seed(t, 3, 1, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(3))) == 1, "the new plan follows" })
	reviewWait(t, 10*time.Second, func() (bool, string) {
		ok, why := reviewDoneAtCurrent(t, f, LedgerTable, x)
		return ok, fmt.Sprintf("%s; runs %v; rescans A %d C %d", why, runs.of(x), a.Stats().Follow.Rescans, c.Stats().Follow.Rescans)
	})
}

// TestResizeWhileDown: a group of one follower down longer than the retention, resized before it
// starts again. The new plan's slots used to run plain passes judged from their own starts (the
// follow checkpoint's since was left out of groupRescans): no rescan, and with the table ledger X's
// change (its record lost) was never handled. Now they judge also from how far the group had read the stream.
func TestResizeWhileDown(t *testing.T) {
	d := groupWentDown(t, LedgerTable, 2*time.Second)
	ctx, f, x, runs, streams, h, group := context.Background(), d.f, d.x, d.runs, d.streams, d.handler, d.group
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = Resize(ctx, locks, group, 2)
	require.NoError(t, err)
	b := startReview(t, f, LedgerTable, "B", streams, func(c *Config) { c.Workers = 0 }, h("B"))
	c := startReview(t, f, LedgerTable, "C", streams, func(c *Config) { c.Workers = 0 }, h("C"))
	reviewWait(t, 30*time.Second, func() (bool, string) {
		return b.Stats().Passes >= 1 && c.Stats().Passes >= 1, "both slots of the new plan passed"
	})
	liftShortRetention()
	f.seed(t, 3, 1, nil)
	reviewWait(t, 30*time.Second, func() (bool, string) { return len(runs.of(itemKey(3))) == 1, "the new plan follows" })
	reviewWait(t, 10*time.Second, func() (bool, string) {
		ok, why := reviewDoneAtCurrent(t, f, LedgerTable, x)
		return ok, fmt.Sprintf("%s; runs %v; B's passes %d rescans %d, C's passes %d rescans %d; slot 0 checkpoint %q", why, runs.of(x),
			b.Stats().Passes, b.Stats().Follow.Rescans, c.Stats().Passes, c.Stats().Follow.Rescans, slotCheckpointOf(t, f, group))
	})
}
