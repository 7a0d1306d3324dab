package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/localstack"
	"github.com/dynapart/dynapart/worker"
)

// Restart runs the fleet against its own DynamoDB Local (with -dbPath persistence), stops the
// server mid-run and starts it again on the same port and folder: the workers wait and carry on.
func Restart(ctx context.Context, env Env, p Params) *Result {
	p.defaults()
	fail := func(err error) *Result {
		r := &Result{Scenario: "dynamodb-restart", Seed: p.Seed, Params: p}
		r.fail("%v", err)
		return r
	}
	port, err := localstack.FreePort()
	if err != nil {
		return fail(err)
	}
	dbPath := filepath.Join(env.Dir, fmt.Sprintf("ddb-restart-%d-%d", p.Seed, port))
	opts := localstack.Options{Port: port, DBPath: dbPath}
	if err := mkdir(dbPath); err != nil {
		return fail(err)
	}
	srv, err := localstack.Start(ctx, opts)
	if err != nil {
		return fail(err)
	}
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		_ = srv.Stop()
	}()
	return run(ctx, env, "dynamodb-restart", p, srv.Endpoint(), func(ctx context.Context, f *fixture) error {
		f.watch()
		extra := []string{"--lease-ttl", "3s", "--heartbeat", "500ms"}
		if err := f.startFleet(ctx, extra...); err != nil {
			return err
		}
		if ok, err := f.waitCompleted(ctx, f.thresholds(1, 0.15, 0.5)[0]); err != nil || !ok {
			return err
		}
		at := f.completed()
		mu.Lock()
		_ = srv.Stop()
		mu.Unlock()
		down := time.Now()
		f.res.SideEffectBound = f.p.Concurrency * (f.p.Slots + f.p.Standbys)
		outage := time.Duration(500+f.rng.IntN(2500)) * time.Millisecond
		select {
		case <-time.After(outage):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		s2, err := localstack.Start(ctx, opts)
		if err != nil {
			return fmt.Errorf("restart DynamoDB Local: %w", err)
		}
		mu.Lock()
		srv = s2
		mu.Unlock()
		f.res.event("DynamoDB Local stopped at %d/%d done, back after %s", at, f.p.Items, time.Since(down).Round(time.Millisecond))
		return nil
	})
}

// crashable is a DynamoDB client that fails every call once crashed: a worker that has lost the
// network, or died, as far as DynamoDB can tell.
type crashable struct {
	*dynamodb.Client
	dead atomic.Bool
}

var errCrashed = errors.New("chaos: worker crashed")

func (c *crashable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	return c.Client.GetItem(ctx, in, o...)
}

func (c *crashable) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	return c.Client.PutItem(ctx, in, o...)
}

func (c *crashable) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c *crashable) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	return c.Client.Query(ctx, in, o...)
}

func (c *crashable) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	return c.Client.Scan(ctx, in, o...)
}

func (c *crashable) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	return c.Client.DescribeTable(ctx, in, o...)
}

func (c *crashable) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if c.dead.Load() {
		return nil, errCrashed
	}
	return c.Client.TransactWriteItems(ctx, in, o...)
}

// skewedClock is the system clock off by a fixed offset.
type skewedClock struct{ off time.Duration }

func (c skewedClock) Now() time.Time                         { return time.Now().Add(c.off) }
func (c skewedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (c skewedClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Skew runs in-process workers whose clocks differ by up to MaxClockSkew (offsets in
// [-skew/2, +skew/2]), and crashes a random slot holder (every DynamoDB call fails from then on) at
// Kills random moments; a standby takes over once the lease has expired by its own clock.
func Skew(ctx context.Context, env Env, p Params) *Result {
	const maxSkew = 500 * time.Millisecond
	p.defaults()
	return run(ctx, env, "clock-skew", p, env.Endpoint, func(ctx context.Context, f *fixture) error {
		f.watch()
		type member struct {
			owner  string
			client *crashable
			w      *worker.Worker
			cancel context.CancelFunc
			done   chan error
			off    time.Duration
		}
		var (
			mu       sync.Mutex
			records  = map[string]map[string]int{}
			effects  = map[string]int{}
			members  []*member
			complete atomic.Int64
		)
		newMember := func() (*member, error) {
			off := time.Duration(f.rng.Int64N(int64(maxSkew))) - maxSkew/2
			m := &member{owner: fmt.Sprintf("w%d", f.n), client: &crashable{Client: f.db}, done: make(chan error, 1), off: off}
			f.n++
			mu.Lock()
			records[m.owner] = map[string]int{}
			mu.Unlock()
			w, err := worker.New(worker.Config{
				Client: m.client, Table: f.table, LeaseTable: f.leases, Workers: f.p.Slots, Once: true,
				LeaseTTL: 2 * time.Second, Heartbeat: 400 * time.Millisecond, MaxClockSkew: maxSkew,
				StandbyPoll: 200 * time.Millisecond, ClaimTTL: 10 * time.Second, PollInterval: time.Second,
				PageSize: 100, Concurrency: f.p.Concurrency, RetryBackoff: 200 * time.Millisecond,
				Owner: m.owner, Clock: skewedClock{off: off}, Logger: slog.New(slog.DiscardHandler),
				Hooks: worker.Hooks{OnItem: func(e worker.ItemEvent) {
					if e.Outcome != worker.OutcomeCompleted {
						return
					}
					complete.Add(1)
					mu.Lock()
					records[m.owner][keyString(e.Key)]++
					mu.Unlock()
					select {
					case f.notify <- struct{}{}:
					default:
					}
				}},
			})
			if err != nil {
				return nil, err
			}
			m.w = w
			wctx, cancel := context.WithCancel(ctx)
			m.cancel = cancel
			go func() {
				m.done <- w.Run(wctx, func(_ context.Context, it worker.Item) error {
					mu.Lock()
					effects[keyString(it.Key)]++
					mu.Unlock()
					return nil
				})
			}()
			members = append(members, m)
			f.res.event("started %s with clock offset %s", m.owner, off)
			return m, nil
		}
		for range f.p.Slots + f.p.Standbys {
			if _, err := newMember(); err != nil {
				return err
			}
		}
		var crashed []*member
		for _, th := range f.thresholds(f.p.Kills, 0.05, 0.8) {
			for complete.Load() < th {
				select {
				case <-f.notify:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			var cands []*member
			for _, m := range members {
				if st := m.w.Stats(); !m.client.dead.Load() && st.Slot >= 0 && st.State == "working" {
					cands = append(cands, m)
				}
			}
			if len(cands) == 0 {
				break
			}
			sort.Slice(cands, func(i, j int) bool { return cands[i].owner < cands[j].owner })
			v := cands[f.rng.IntN(len(cands))]
			st := v.w.Stats()
			v.client.dead.Store(true)
			crashed = append(crashed, v)
			f.res.SideEffectBound += f.p.Concurrency
			f.res.event("crashed %s (slot %d, token %d, offset %s) at %d/%d done", v.owner, st.Slot, st.Token, v.off, complete.Load(), f.p.Items)
			if _, err := newMember(); err != nil {
				return err
			}
		}
		var errs []error
		for _, m := range members {
			if m.client.dead.Load() {
				continue
			}
			select {
			case err := <-m.done:
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", m.owner, err))
				}
				m.done <- nil
			case <-ctx.Done():
				errs = append(errs, fmt.Errorf("%s still running: %w", m.owner, context.Cause(ctx)))
			}
		}
		for _, m := range members {
			m.cancel()
			<-m.done
		}
		for _, m := range members {
			f.res.Takeovers += int(m.w.Stats().Takeovers)
		}
		// The audit reads the in-process records and side effects through files.
		for owner, keys := range records {
			if err := writeLines(filepath.Join(f.dir, owner+".keys"), keys); err != nil {
				return err
			}
			f.procs = append(f.procs, &Proc{Owner: owner, Record: filepath.Join(f.dir, owner+".keys"), exited: closed()})
		}
		if err := writeLines(f.effects, effects); err != nil {
			return err
		}
		return errors.Join(errs...)
	})
}
