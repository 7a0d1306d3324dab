package chaos

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// followWriter is the follow scenario's application: one goroutine that keeps changing the table
// while the workers back-fill and follow it. Every value it writes to an item's "n" is new (a
// global counter above every seeded n), so a value names one version of one item, and the order
// of an item's values is the order of its versions (one writer: its writes to an item land in the
// order it sends them). It updates items, several times in quick succession, rewrites an item's
// current value (a write that changes no content), deletes items and inserts new ones, and
// records all of it for the audit (followHistory).
type followWriter struct {
	db    *dynamodb.Client
	table string
	rng   *mrand.Rand
	pace  time.Duration // between two operations

	next    int64 // the next value
	nextKey int   // the next new item's number
	hist    followHistory
	live    []string       // keys of live items, for picks
	livePos map[string]int // key -> index in live

	writes atomic.Int64 // writes that landed so far (read while the writer runs)
	held   atomic.Bool  // Hold: no operation while set
	stop   chan struct{}
	done   chan struct{}
	err    error
}

// followHistory is what the writer did, read once it has stopped.
type followHistory struct {
	items   map[string]*writtenItem // by keyString
	counts  map[string]int          // operations by kind
	writes  int64                   // writes that landed (a burst is several)
	started time.Time
	stopped time.Time
}

// writtenItem is one item's history: its values in the order written (the seeded value first),
// the rewrites of a current value, and its delete.
type writtenItem struct {
	values   []int64
	rewrites []valueAt // the value rewritten, and when the rewrite returned
	deleted  time.Time // when the delete returned; zero while the item lives
	inserted bool      // inserted by the writer (not seeded)
}

type valueAt struct {
	value int64
	at    time.Time
}

// latest is the item's current value.
func (w *writtenItem) latest() int64 { return w.values[len(w.values)-1] }

// followValueBase is the first value the writer writes: above every seeded n (seeded item i has
// n = i).
const followValueBase = 1_000_000_000

func newFollowWriter(db *dynamodb.Client, table string, seeded int, seed uint64, pace time.Duration) *followWriter {
	w := &followWriter{db: db, table: table, rng: mrand.New(mrand.NewPCG(seed, 0xf011)), pace: pace,
		next: followValueBase, nextKey: seeded, livePos: map[string]int{},
		hist: followHistory{items: map[string]*writtenItem{}, counts: map[string]int{}},
		stop: make(chan struct{}), done: make(chan struct{})}
	for i := range seeded {
		k := followKey(i)
		w.hist.items[k] = &writtenItem{values: []int64{int64(i)}}
		w.addLive(k)
	}
	return w
}

// followKey is item i's key as DYNAPART_KEY and keyString render it (dynapart seed's keys).
func followKey(i int) string { return fmt.Sprintf(`{"id":"item-%08d"}`, i) }

// followKeyAttr is the "id" of a key rendered by followKey.
func followKeyAttr(k string) types.AttributeValue {
	id := strings.TrimSuffix(strings.TrimPrefix(k, `{"id":"`), `"}`)
	return &types.AttributeValueMemberS{Value: id}
}

func (w *followWriter) addLive(k string) {
	w.livePos[k] = len(w.live)
	w.live = append(w.live, k)
}

func (w *followWriter) removeLive(k string) {
	i := w.livePos[k]
	last := w.live[len(w.live)-1]
	w.live[i], w.livePos[last] = last, i
	w.live = w.live[:len(w.live)-1]
	delete(w.livePos, k)
}

// start runs the writer until Stop.
func (w *followWriter) start(ctx context.Context) {
	w.hist.started = time.Now()
	go func() {
		defer close(w.done)
		defer func() { w.hist.stopped, w.hist.writes = time.Now(), w.writes.Load() }()
		t := time.NewTicker(w.pace)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if w.held.Load() {
				continue
			}
			if err := w.step(ctx); err != nil {
				if ctx.Err() == nil {
					w.err = err
				}
				return
			}
		}
	}()
}

// Hold pauses (true) or resumes (false) the writer.
func (w *followWriter) Hold(on bool) { w.held.Store(on) }

// Stop stops the writer and returns its history (and the error that stopped it early, if any).
func (w *followWriter) Stop() (*followHistory, error) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return &w.hist, w.err
}

// step is one operation: an update (40%), a burst of 2-4 updates of one item (15%), a rewrite of
// an item's current value (15%), a delete (10%) or an insert (20%, a third of them updated at
// once).
func (w *followWriter) step(ctx context.Context) error {
	x := w.rng.Float64()
	if len(w.live) == 0 || x >= 0.8 {
		k := followKey(w.nextKey)
		w.nextKey++
		if err := w.insert(ctx, k); err != nil {
			return err
		}
		if w.rng.IntN(3) == 0 {
			w.hist.counts["insert+update"]++
			return w.update(ctx, k)
		}
		w.hist.counts["insert"]++
		return nil
	}
	k := w.live[w.rng.IntN(len(w.live))]
	switch {
	case x < 0.4:
		w.hist.counts["update"]++
		return w.update(ctx, k)
	case x < 0.55:
		w.hist.counts["burst"]++
		for range 2 + w.rng.IntN(3) {
			if err := w.update(ctx, k); err != nil {
				return err
			}
		}
		return nil
	case x < 0.7:
		w.hist.counts["rewrite"]++
		return w.rewrite(ctx, k)
	default:
		w.hist.counts["delete"]++
		return w.delete(ctx, k)
	}
}

// update writes the next value to k's n.
func (w *followWriter) update(ctx context.Context, k string) error {
	v := w.next
	w.next++
	if err := w.setN(ctx, k, v); err != nil {
		return err
	}
	it := w.hist.items[k]
	it.values = append(it.values, v)
	return nil
}

// rewrite writes k's current value again: a write that changes no content.
func (w *followWriter) rewrite(ctx context.Context, k string) error {
	it := w.hist.items[k]
	if err := w.setN(ctx, k, it.latest()); err != nil {
		return err
	}
	it.rewrites = append(it.rewrites, valueAt{value: it.latest(), at: time.Now()})
	return nil
}

func (w *followWriter) setN(ctx context.Context, k string, v int64) error {
	return w.retry(ctx, "update "+k, func(ctx context.Context) error {
		_, err := w.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(w.table), Key: map[string]types.AttributeValue{"id": followKeyAttr(k)},
			UpdateExpression:          aws.String("SET n = :n"),
			ConditionExpression:       aws.String("attribute_exists(id)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}},
		})
		return err
	})
}

// insert puts a new item (as dynapart seed makes them) with the next value.
func (w *followWriter) insert(ctx context.Context, k string) error {
	v := w.next
	w.next++
	err := w.retry(ctx, "insert "+k, func(ctx context.Context) error {
		_, err := w.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(w.table),
			Item: map[string]types.AttributeValue{"id": followKeyAttr(k), "n": &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)},
				"grp": &types.AttributeValueMemberS{Value: "g" + strconv.Itoa(w.nextKey%10)}, "payload": &types.AttributeValueMemberS{Value: strings.Repeat("x", 100)}},
			ConditionExpression: aws.String("attribute_not_exists(id)"),
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil // a repeat of a put whose answer was lost
		}
		return err
	})
	if err != nil {
		return err
	}
	w.hist.items[k] = &writtenItem{values: []int64{v}, inserted: true}
	w.addLive(k)
	return nil
}

func (w *followWriter) delete(ctx context.Context, k string) error {
	err := w.retry(ctx, "delete "+k, func(ctx context.Context) error {
		_, err := w.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(w.table), Key: map[string]types.AttributeValue{"id": followKeyAttr(k)}})
		return err
	})
	if err != nil {
		return err
	}
	w.hist.items[k].deleted = time.Now()
	w.removeLive(k)
	return nil
}

// retry repeats a write (each is idempotent) through DynamoDB Local's slow moments on a loaded
// machine.
func (w *followWriter) retry(ctx context.Context, what string, write func(context.Context) error) error {
	var err error
	for attempt := range 30 {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = write(wctx)
		cancel()
		if err == nil {
			w.writes.Add(1)
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		select {
		case <-time.After(time.Duration(100*(attempt+1)) * time.Millisecond):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return fmt.Errorf("chaos: the writer's %s failed 30 times: %w", what, err)
}

// live is the number of live items.
func (h *followHistory) live() int {
	n := 0
	for _, it := range h.items {
		if it.deleted.IsZero() {
			n++
		}
	}
	return n
}
