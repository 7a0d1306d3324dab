package chaos

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// slotView is the watcher's latest view of one slot.
type slotView struct {
	owner    string
	token    int64
	expires  int64 // ms, holder's clock
	acquired int64 // ms, acquirer's clock
	released bool
}

// LeaseWatcher follows a group's slot items in the lease table. It reads the table's stream (every
// write, see leaseStream) for the lease history checks, and polls the table at a high rate for the
// scenarios' waits (Token, WaitToken). The checks (run on the polls too, reported only when the
// stream could not be read to the end):
//   - a slot's fencing token never decreases;
//   - one token never has two owners;
//   - a new token is taken only from a released lease or after the previous holder's expiry
//     (acquired_at >= the last expires_at seen), so two holders never hold a slot at once.
//
// It also records which owner held each (slot, token), for the ledger audit.
type LeaseWatcher struct {
	db    *dynamodb.Client
	table string
	group string

	mu         sync.Mutex
	slots      map[int]*slotView
	owners     map[[2]int64]string // (slot, token) -> owner
	violations []string
	takeovers  int
	acquires   int
	skipped    int // token jumps by more than one between two reads
	reads      int
	readErrors int

	changed chan struct{} // closed and replaced after every read

	stream    *leaseStream // nil when the stream could not be enabled (streamErr)
	streamErr error
	hist      streamHistory

	stop chan struct{}
	done chan struct{}
}

// Token is the latest token seen on slot (0: none yet).
func (w *LeaseWatcher) Token(slot int) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v := w.slots[slot]; v != nil {
		return v.token
	}
	return 0
}

// Changed is closed after the next read.
func (w *LeaseWatcher) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// WaitToken waits until slot's token is above min (a new lease was taken).
func (w *LeaseWatcher) WaitToken(ctx context.Context, slot int, min int64) error {
	for {
		ch := w.Changed()
		if w.Token(slot) > min {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("chaos: slot %d token still <= %d: %w", slot, min, context.Cause(ctx))
		}
	}
}

// WatchLeases enables the lease table's stream (sc reads it) and starts polling every interval
// until Stop. Start it before the workers, so the stream holds every write of the run.
func WatchLeases(db *dynamodb.Client, sc *dynamodbstreams.Client, table, group string, interval time.Duration) *LeaseWatcher {
	w := &LeaseWatcher{db: db, table: table, group: group, slots: map[int]*slotView{}, owners: map[[2]int64]string{},
		changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		hist: streamHistory{owners: map[[2]int64]string{}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	w.stream, w.streamErr = enableStream(ctx, db, sc, table, group)
	cancel()
	go w.loop(interval)
	return w
}

// streamEvery is how many polls pass between two reads of the stream: the history need not be
// current while the run goes on, and DynamoDB Local serves the workers too.
const streamEvery = 5

func (w *LeaseWatcher) loop(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for i := 0; ; i++ {
		w.poll()
		if w.stream != nil && i%streamEvery == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = w.stream.read(ctx, &w.hist)
			cancel()
		}
		select {
		case <-w.stop:
			w.poll()
			if w.stream != nil {
				w.stream.drain(&w.hist, 20*time.Second)
			}
			return
		case <-t.C:
		}
	}
}

// Stop ends the polling after one last read, and reads the stream to its end.
func (w *LeaseWatcher) Stop() {
	close(w.stop)
	<-w.done
}

func nAttr(m map[string]types.AttributeValue, k string) int64 {
	if v, ok := m[k].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func sAttr(m map[string]types.AttributeValue, k string) string {
	if v, ok := m[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (w *LeaseWatcher) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := w.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(w.table),
		KeyConditionExpression:    aws.String("pk = :pk AND sk >= :zero"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "group#" + w.group}, ":zero": &types.AttributeValueMemberN{Value: "0"}},
		ConsistentRead:            aws.Bool(true),
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() {
		close(w.changed)
		w.changed = make(chan struct{})
	}()
	if err != nil {
		w.readErrors++ // DynamoDB down (restart scenario), or the table not yet there
		return
	}
	w.reads++
	for _, it := range out.Items {
		slot := int(nAttr(it, "sk"))
		v := slotView{owner: sAttr(it, "owner"), token: nAttr(it, "token"), expires: nAttr(it, "expires_at"), acquired: nAttr(it, "acquired_at")}
		if b, ok := it["released"].(*types.AttributeValueMemberBOOL); ok {
			v.released = b.Value
		}
		if v.token == 0 || v.owner == "" {
			continue // not a lease, or a ResetGroup (owner removed, token kept)
		}
		prev := w.slots[slot]
		if o, ok := w.owners[[2]int64{int64(slot), v.token}]; ok && o != v.owner {
			w.violations = append(w.violations, fmt.Sprintf("slot %d token %d held by %s and by %s", slot, v.token, o, v.owner))
		}
		w.owners[[2]int64{int64(slot), v.token}] = v.owner
		if prev == nil {
			w.acquires++
			w.slots[slot] = &v
			continue
		}
		switch {
		case v.token < prev.token:
			w.violations = append(w.violations, fmt.Sprintf("slot %d token went back from %d to %d", slot, prev.token, v.token))
		case v.token > prev.token:
			w.acquires++
			if v.token > prev.token+1 {
				w.skipped++
			}
			if !prev.released {
				w.takeovers++
				if v.token == prev.token+1 && v.acquired < prev.expires {
					w.violations = append(w.violations, fmt.Sprintf(
						"slot %d: %s took token %d at %d while %s's token %d was held until %d (not released)",
						slot, v.owner, v.token, v.acquired, prev.owner, prev.token, prev.expires))
				}
			}
		}
		if v.token >= prev.token {
			w.slots[slot] = &v
		}
	}
}

// LeaseReport is what the watcher saw.
type LeaseReport struct {
	// Source is "stream" when the checks ran on every write, else "polls (why)": polls can miss a
	// release followed at once by a new acquisition and then report a takeover of a held lease.
	Source                                              string
	Reads, ReadErrors, Acquisitions, Takeovers, Skipped int
	StreamRecords, StreamErrors                         int
	Releases, Retakes                                   int // from the stream: releases; released slots taken again by the same owner
	Resets                                              int // from the stream: ResetGroup writes (owner removed, token kept)
	Violations                                          []string
	Owners                                              map[[2]int64]string // (slot, token) -> owner
}

// Report returns the history's summary; call it after Stop.
func (w *LeaseWatcher) Report() LeaseReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := LeaseReport{Reads: w.reads, ReadErrors: w.readErrors, Skipped: w.skipped, Owners: map[[2]int64]string{}}
	for k, v := range w.owners {
		r.Owners[k] = v
	}
	var why error
	switch {
	case w.stream == nil:
		why = w.streamErr
	case w.stream.broken != nil:
		why = w.stream.broken
	}
	if why != nil {
		r.Source = fmt.Sprintf("polls (stream: %v)", why)
		r.Acquisitions, r.Takeovers = w.acquires, w.takeovers
		r.Violations = append([]string(nil), w.violations...)
		return r
	}
	r.Source = "stream"
	r.StreamRecords, r.StreamErrors = w.hist.records, w.stream.errors
	r.Releases, r.Retakes, r.Resets = w.hist.releases, w.hist.retakes, w.hist.resets
	r.Acquisitions, r.Takeovers = w.hist.acquires, w.hist.takeovers
	r.Violations = append([]string(nil), w.hist.violations...)
	for k, v := range w.hist.owners {
		r.Owners[k] = v
	}
	return r
}
