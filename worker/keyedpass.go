package worker

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/capacity"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
)

// Keyed passes. A once-job's pass that leaves items for another pass (a retry not yet due, a claim
// another worker holds, a write whose outcome is unknown) used to scan its whole share again for
// them, up to MaxAttempts times: a table with one item that always fails was read five times. A
// pass now names the items it leaves (leftovers), and while it can, the slot's next pass reads
// only them, by key (BatchGetItem, 100 keys a request, as consistent as the scan), and hands them
// to the handlers as a scanned page. It rescans the share instead when:
//
//   - the pass cannot name every item: a thief's items (their unit markers say only dirty), a pass
//     resumed from a checkpoint (items before its position), a follower's or a versioned
//     worker's items, more than maxLeftovers;
//   - reading them by key would cost more than the scan did: an item read by key is billed at
//     least half a unit (a whole one when consistent), a scan by the bytes it reads, so a small
//     table of small items is cheaper to scan again;
//   - the worker reads an index (the index holds what is due; an item read by key may have left
//     it), or its client has no BatchGetItem;
//   - the keyed pass stops or its writes fail (its checkpoint says dirty, so the slot's next
//     holder rescans), or its reads failed on their way maxKeyedFailures times in a row (each is
//     made again after a backoff, with the same keys); a read refused for good turns keyed passes
//     off for the run.
//
// Nothing else changes: the items' writes are the same conditional writes, judged by the state
// read, so reading fewer items can only leave items for a rescan, never complete one twice. In
// filter mode a keyed pass handles the items it left even when their partition attribute has
// moved them to another slot since: that slot's pass may be over already, and a rescan would
// drop them, leaving them undone; its handler may run too, as for an item claimed twice in
// flight (complete-only: the handler runs in both, the completion and its effects land once). A keyed
// pass keeps the slot's checkpoint at the end of the scanned pass (with its counts), so thieves
// find nothing to take and a new holder resumes a complete pass.

// maxLeftovers is the most items a pass names for a keyed pass; beyond it the share is rescanned.
const maxLeftovers = 10_000

// leftovers are the items a pass left for another pass, by key; unnamed when it left one it
// cannot name (or too many).
type leftovers struct {
	mu      sync.Mutex
	keys    map[string]Key // by ledger.KeyText
	unnamed bool
}

// add names key's item (nil: an item the pass cannot name).
func (l *leftovers) add(key Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unnamed {
		return
	}
	id := ""
	if key != nil {
		id = ledger.KeyText(key)
	}
	if _, ok := l.keys[id]; ok && key != nil {
		return
	}
	if key == nil || len(l.keys) >= maxLeftovers {
		l.unnamed, l.keys = true, nil
		return
	}
	if l.keys == nil {
		l.keys = map[string]Key{}
	}
	l.keys[id] = key
}

// named is the items left, and whether they are every item the pass left.
func (l *leftovers) named() ([]Key, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unnamed {
		return nil, false
	}
	return slices.Collect(maps.Values(l.keys)), true
}

// forget starts the list again (a keyed pass names only what it leaves itself).
func (l *leftovers) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys, l.unnamed = nil, false
}

// readCost is what a pass's scan read: the capacity it consumed and the items it evaluated.
type readCost struct {
	rcu     float64
	scanned int64
}

// byKey is about what reading n of the scan's items by key costs. An item read by key is billed
// by its own size in whole 4 KB units (half a unit each when not consistent), a scan by the bytes
// of its pages: each item costs the scan's average item rounded up to whole such charges (less
// a hundredth: a scan's pages round up too), at least one.
func (r readCost) byKey(n int, consistent bool) float64 {
	unit := 0.5
	if consistent {
		unit = 1
	}
	perItem := unit
	if r.scanned > 0 {
		perItem = unit * max(1, math.Ceil(r.rcu/float64(r.scanned)/unit-0.01))
	}
	return float64(n) * perItem
}

// keyedWork is what a pass leaves for the next: the items it named, whether it named them all,
// and what its scan cost (carried over from the scanned pass by keyed passes).
type keyedWork struct {
	keys  []Key
	named bool
	cost  readCost
}

// readsByKey reports whether the slot's next pass reads work's items by key (see above).
func (s *slot) readsByKey(work keyedWork) bool {
	c := s.w.cfg
	if !work.named || len(work.keys) == 0 || !c.Once || c.Follow || c.Versions || c.Mode == scan.ModeIndex || s.rescan {
		return false
	}
	if _, ok := c.Client.(batchGetter); !ok || s.w.keyedRefused.Load() {
		return false
	}
	return work.cost.byKey(len(work.keys), c.ConsistentRead) < work.cost.rcu
}

// batchGetter is a client with BatchGetItem (a *dynamodb.Client has it).
type batchGetter interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// passesByKey runs keyed passes after a complete pass that left work, after waiting wait, for as
// long as readsByKey holds. ended reports that the slot's loop ends with (finished, err): the
// share is done and the slot finished, or the slot stopped. Otherwise the slot goes on with a
// scanned pass after next, the wait the last pass asked for.
func (s *slot) passesByKey(work keyedWork, wait time.Duration) (finished, ended bool, next time.Duration, err error) {
	failures := 0
	for s.readsByKey(work) {
		if !s.wait(wait) || !s.waitResumed() {
			return false, true, 0, nil
		}
		res, err := s.runKeyedPass(work.keys)
		s.cp = res.cp
		switch {
		case s.stopped() || s.pastStop():
			s.cp.dirty = true // not every item was looked at: the next holder rescans
			_ = s.saveCheckpoint(s.cp.encode())
			return false, true, 0, nil
		case err != nil:
			s.cp.dirty = true
			failures++
			if !s.keyedFailed(err, failures) {
				return false, false, 0, nil
			}
			// The same keys again: what the failed pass left is among them.
			wait = backoff(failedPassBackoff, maxFailedPassBackoff, failures)
			continue
		}
		failures = 0
		s.w.stats.passes.Add(1)
		s.log.Info("dynapart: pass complete (the items left, read by key)", "pass", s.cp.pass, "items", len(work.keys), "again", s.cp.dirty)
		if !s.cp.dirty {
			finished, err := s.finishWhenResumed()
			return finished, true, 0, err
		}
		if err := s.saveCheckpoint(s.cp.encode()); err != nil {
			return false, true, 0, nil
		}
		work.keys, work.named = res.left.keys, res.left.named
		wait = s.w.onceWait(res.nextDue)
	}
	return false, false, wait, nil
}

// keyedFailed logs a keyed pass that failed with err (the failures-th in a row) and reports
// whether to read the same keys again after a backoff: a keyed read that failed on its way
// (throttled past the SDK's retries, the network), up to maxKeyedFailures times in a row.
// Otherwise the slot scans its share: a read refused for good (e.g. no dynamodb:BatchGetItem on
// the table) turns keyed passes off for the run; a refusal of the pass's writes is not the keyed
// read's, and the scan meets it too.
func (s *slot) keyedFailed(err error, failures int) (again bool) {
	var rerr *keyedReadError
	read := errors.As(err, &rerr)
	if read && !refusedForGood(err) && failures < maxKeyedFailures {
		s.log.Warn("dynapart: reading the items left for another pass by key failed; reading them again", "err", err, "failures", failures)
		return true
	}
	s.log.Warn("dynapart: the pass over the items left for another pass, read by key, failed; scanning the share again", "err", err)
	if read && refusedForGood(err) {
		s.w.keyedRefused.Store(true)
	}
	return false
}

// maxKeyedFailures is how many keyed passes in a row may fail on their reads before the slot
// scans its share instead.
const maxKeyedFailures = 3

// runKeyedPass handles once more the items of keys, read by key, under the slot's lease.
func (s *slot) runKeyedPass(keys []Key) (passResult, error) {
	p := s.newPass(s.cp, wholeShare{})
	p.dirty.Store(false)
	p.left.forget()
	return p.runKeyed(keys)
}

// runKeyed reads keys' items and hands them to the handlers as dispatch does a scanned page; it
// fails when an item was not acknowledged (the pass stopped before its handler ended).
func (p *pass) runKeyed(keys []Key) (passResult, error) {
	stop := p.startContexts()
	defer stop()
	var sent, acked atomic.Int64
	err := p.withHandlers(func() error { return p.dispatchKeys(keys, &sent, &acked) })
	res := p.result()
	if rerr := p.refused(); rerr != nil {
		return res, rerr
	}
	switch {
	case err != nil:
		return res, err
	case acked.Load() != sent.Load():
		return res, errors.New("dynapart: keyed pass ended with unacknowledged items")
	}
	return res, nil
}

// dispatchKeys reads keys' items, 100 a request, and dispatches each request's items as a page.
func (p *pass) dispatchKeys(keys []Key, sent, acked *atomic.Int64) error {
	r := p.newKeyReader()
	for chunk := range slices.Chunk(keys, maxKeysPerGet) {
		items, err := r.read(p.fetchCtx, chunk)
		if err != nil {
			return err
		}
		page := &scan.Page{Items: make([]*scan.Item, len(items))}
		for i, it := range items {
			sent.Add(1)
			page.Items[i] = scan.NewItem(it, func() { acked.Add(1) })
		}
		if err := p.dispatch(p.fetchCtx, page); err != nil {
			return err
		}
	}
	return nil
}

// keyedReadError is a keyed pass's BatchGetItem that failed (see passesByKey: only its refusal
// turns keyed reads off).
type keyedReadError struct{ err error }

func (e *keyedReadError) Error() string {
	return "dynapart: read the items left by key: " + e.err.Error()
}
func (e *keyedReadError) Unwrap() error { return e.err }

// maxKeysPerGet is the most keys one BatchGetItem takes.
const maxKeysPerGet = 100

// keyReader reads a keyed pass's items: the scan's projection and consistency, within ReadRate.
type keyReader struct {
	w      *Worker
	db     batchGetter
	attrs  types.KeysAndAttributes // all but Keys
	bucket *capacity.Bucket        // nil without ReadRate
}

func (p *pass) newKeyReader() *keyReader {
	c := p.w.cfg
	r := &keyReader{w: p.w, db: c.Client.(batchGetter)}
	r.attrs.ConsistentRead = aws.Bool(c.ConsistentRead)
	if attrs := p.projection(); len(attrs) > 0 {
		if p.plan.Mode == scan.ModeFilter {
			attrs = append(attrs, c.PartitionAttr) // as the scan's projection: the handler sees it
		}
		r.attrs.ProjectionExpression, r.attrs.ExpressionAttributeNames = keyProjection(p.e.keyAttrs, attrs)
	}
	if c.ReadRate > 0 {
		r.bucket = capacity.NewBucket(c.ReadRate, 2)
	}
	return r
}

// keyProjection is the projection of keyAttrs and attrs, each name once, as the scan's:
// DynamoDB refuses a path named twice (two document paths overlap), e.g. a key attribute that
// Projection names too.
func keyProjection(keyAttrs, attrs []string) (*string, map[string]string) {
	names := expression.NamesList(expression.NameNoDotSplit(keyAttrs[0]))
	seen := map[string]bool{keyAttrs[0]: true}
	for _, a := range append(slices.Clone(keyAttrs[1:]), attrs...) {
		if a == "" || seen[a] {
			continue
		}
		seen[a] = true
		names = names.AddNames(expression.NameNoDotSplit(a))
	}
	e, err := expression.NewBuilder().WithProjection(names).Build()
	if err != nil {
		return nil, nil // not reached: the names are not empty
	}
	return e.Projection(), e.Names()
}

// read reads keys' items (those that exist), again for the keys DynamoDB left unprocessed, and
// adds the capacity consumed to the worker's.
func (r *keyReader) read(ctx context.Context, keys []Key) ([]map[string]types.AttributeValue, error) {
	table := r.w.cfg.Table
	var items []map[string]types.AttributeValue
	for round := 0; len(keys) > 0; round++ {
		if round > 0 {
			select {
			case <-r.w.cfg.Clock.After(backoff(50*time.Millisecond, time.Second, round)):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		req := r.attrs
		req.Keys = keys
		taken := 0
		if r.bucket != nil {
			var err error
			if taken, err = r.bucket.Wait(ctx, readCost{}.byKey(len(keys), aws.ToBool(req.ConsistentRead))); err != nil {
				return nil, err
			}
		}
		out, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{table: req}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		if err != nil {
			return nil, &keyedReadError{err: err}
		}
		rcu := 0.0
		for _, cc := range out.ConsumedCapacity {
			rcu += aws.ToFloat64(cc.CapacityUnits)
		}
		if r.bucket != nil {
			r.bucket.Settle(taken, rcu)
		}
		r.w.mu.Lock()
		r.w.rcuDone += rcu
		r.w.mu.Unlock()
		items = append(items, out.Responses[table]...)
		keys = out.UnprocessedKeys[table].Keys
	}
	return items, nil
}
