package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
)

// pass is one scan of a share under the slot's lease, with everything its loops share: the slot
// (embedded: the worker, the run's env, the lease and handler, the stop time), what it reads (its
// share), the contexts that stop it, the channels between its loops and the state its items leave
// behind. Its loops are methods: the drain timer, the checkpoint saver, the completer, the handler
// pool and dispatch (called by the scanner for each page).
type pass struct {
	*slot
	from  slotCheckpoint // where the pass started
	share share          // what the pass reads and where it saves its position (see share.go)

	fetchCtx context.Context // stops claiming: shutdown, lease loss, the deadline margin, or endFetch; fenced by the lease
	workCtx  context.Context // cancels handlers: lease loss, or DrainTimeout after fetchCtx ends
	// endFetch ends fetchCtx with a cause, as a shutdown would (a follower whose group fell too
	// far behind the stream: slot.keepFollowing).
	endFetch context.CancelCauseFunc

	sc          *scan.Scanner
	latest      atomic.Pointer[string] // the scanner's latest checkpoint
	tasks       chan task              // dispatch -> handler pool
	completions chan completion        // handler pool -> completer; nil without batched completions

	// dirty reports that the pass met items that need another pass (retries, items claimed
	// elsewhere); it is read after the scan position (see current), so a saved checkpoint never
	// drops it for an item behind the position.
	dirty   atomic.Bool
	mu      sync.Mutex
	nextDue time.Time  // once mode: the earliest pending retry or foreign claim
	left    leftovers  // once mode: the items that need another pass (see keyedpass.go)
	gate    *claimGate // with BatchClaims: bounds claims made ahead of the handlers
	refusal error      // a write DynamoDB refused for good, which ends the pass (see stopOnRefusal)

	// counts are this pass's additions to the slot's counts (see slotCounts); startedAt and
	// pausedAtStart (the worker's paused time then) give its working time.
	counts        passCounts
	startedAt     time.Time
	pausedAtStart time.Duration
}

// passCounts are the items a pass scanned, moved to done and moved to failed.
type passCounts struct{ scanned, done, failed atomic.Int64 }

// passResult is what a pass leaves behind.
type passResult struct {
	cp         slotCheckpoint  // position reached (complete only when err == nil)
	checkpoint checkpointState // whether cp was sent to the lease, or left to the finish write
	nextDue    time.Duration   // once mode: when the earliest pending retry or foreign claim is due
	left       keyedWork       // once mode: the items left for another pass (see keyedpass.go)
}

// task is a scanned item on its way to a handler.
type task struct {
	item  *scan.Item
	key   Key
	claim *Claim // set when claimed in a batch
	// attempt is the attempt a complete-only item makes (its recorded attempts + 1); claims
	// carry their own.
	attempt int
	fresh   bool   // the scan saw the item with no ledger state (see ClaimRequest.Fresh)
	seen    string // the claim id of the state the item was judged by (see ClaimRequest.Seen)
	// checked: complete-only, the state the scan read allowed the write (the prefilter), and
	// attempt is set from it: completeOnlyStates need not read or judge it again.
	checked bool
	// follow: a candidate of the stream (follow.go), resolved by followOne; item.Attrs is the
	// record's new image.
	follow bool
	// current is the item as of its claim when the worker records versions (contentAsClaimed):
	// what its handler gets instead of item.Attrs.
	current map[string]types.AttributeValue
	// finished, when set, is told that the item needs nothing more (see followOne): it moved to
	// done, or it cannot be processed at all (unprocessable).
	finished *atomic.Bool
	// ran, when set, is told that the handler ran (see followOne).
	ran *atomic.Bool
	// reopenedDone is the version a done item had when this worker's Renew reopened it, for the
	// claim that follows the renew (see changeUndone); "" otherwise.
	reopenedDone string
	// reopened: a claim of the item was refused by a row finished at another version, and the
	// worker reopened it (renewRefused): claimed once more, not again.
	reopened bool
	// refused is the state that refused the item's claim in a batch, when the worker may reopen
	// it (mayRenew): a handler does (reopenRefused), then claims it alone.
	refused *ItemState
}

// minNextDue is the shortest wait before the next pass that runPass reports in once mode.
const minNextDue = 100 * time.Millisecond

// runPass scans the slot's share once (resuming from cp) and handles every item it yields. A
// once-worker's pass marks the share's units for thieves (see share.go).
func (s *slot) runPass(cp slotCheckpoint) (passResult, error) {
	if cp.counts.since.IsZero() {
		cp.counts.since = s.passStart()
	}
	var sh share = wholeShare{}
	switch {
	case s.rescan:
		sh = tableShare{} // the stream lost records of every share (follow_rescan.go)
	case s.w.marksUnits(s.plan) && cp.run != 0:
		sh = &markedShare{marks: s.w.markerSet(cp.epoch, s.lease.Slot(), cp.pass, cp.run)}
	}
	return s.newPass(cp, sh).run()
}

// passStart is the start of a pass the slot begins, as its checkpoint's since keeps it (by the
// holder's clock). A worker without Follow saves it MaxClockSkew early: its pass may begin before
// the table's stream is turned on, and a follower that resumes the pass rescans when it began
// before the stream (slot.outlivedRetention compares it with the stream's own time), which a
// clock ahead would hide. A follower begins a pass only while the stream is on: its start is
// saved as read, so a follower started just after `init --stream` does not rescan the table.
func (s *slot) passStart() time.Time {
	now := s.w.cfg.Clock.Now()
	if !s.w.cfg.Follow {
		now = now.Add(-s.w.cfg.MaxClockSkew)
	}
	return now.Truncate(time.Millisecond)
}

// newPass is a pass of the slot over sh, starting from cp.
func (s *slot) newPass(from slotCheckpoint, sh share) *pass {
	now := s.w.cfg.Clock.Now()
	p := &pass{slot: s, from: from, share: sh, startedAt: now, pausedAtStart: s.w.pause.pausedTime(now)}
	p.dirty.Store(from.dirty)
	if from.dirty {
		p.left.add(nil) // resumed: items before the position may need another pass
	}
	if s.w.cfg.BatchClaims {
		p.gate = newClaimGate(s.w.cfg.Concurrency, s.w.cfg.ClaimTTL)
	}
	return p
}

func (p *pass) run() (passResult, error) {
	c := p.w.cfg
	stopContexts := p.startContexts()
	defer stopContexts()
	if err := p.openScanner(); err != nil {
		return passResult{cp: p.from}, err
	}
	defer p.w.scanEnded(p.sc)

	scanErr := p.scanAndHandle()
	complete := scanErr == nil && p.sc.Done()

	res := passResult{cp: p.current()}
	if complete && c.Once && p.share.whole() && !res.cp.dirty {
		res.checkpoint = checkpointWithFinish
	} else if !p.leaseEnded() {
		_ = p.save(res.cp)
	}
	// Stopped, units thieves have finished are done in the slot's checkpoint too, so that neither
	// its next holder nor a new plan reads them again; complete, the pass is complete once every
	// unit a thief took is done (see share.go).
	changed, err := p.share.settle(p, complete)
	if changed {
		res.cp = p.current()
		if !p.leaseEnded() {
			_ = p.save(res.cp)
		}
	}
	if complete {
		scanErr = err
	}
	res.nextDue, res.left = p.leftBehind()
	st := p.sc.Stats()
	res.left.cost = readCost{rcu: st.RCU, scanned: st.Scanned}
	if err := p.refused(); err != nil {
		return res, err // a failed pass: retried until OutageTimeout
	}
	if scanErr != nil {
		if p.fetchCtx.Err() != nil {
			return res, p.fetchCtx.Err()
		}
		return res, scanErr
	}
	if !p.sc.Done() {
		return res, errors.New("dynapart: scan ended with unacknowledged items")
	}
	return res, nil
}

// leftBehind is when the earliest item the pass left for another is due (once mode), and the
// items it left.
func (p *pass) leftBehind() (time.Duration, keyedWork) {
	var due time.Duration
	p.mu.Lock()
	if !p.nextDue.IsZero() {
		due = max(p.nextDue.Sub(p.w.cfg.Clock.Now()), minNextDue)
	}
	p.mu.Unlock()
	var left keyedWork
	left.keys, left.named = p.left.named()
	return due, left
}

// result is what the pass leaves behind now: its position and the items left for another pass.
func (p *pass) result() passResult {
	res := passResult{cp: p.current()}
	res.nextDue, res.left = p.leftBehind()
	return res
}

// startContexts derives fetchCtx and workCtx and starts the drain timer; stop ends them all and
// returns once the timer has returned.
func (p *pass) startContexts() (stop func()) {
	stopCtx, cancelStop := p.w.untilStop(p.lease.Context(), p.stopAt)
	fetchCtx, cancelFetch := context.WithCancelCause(stopCtx)
	stopFetchOnCtx := context.AfterFunc(p.ctx, cancelStop)
	p.endFetch = cancelFetch
	workCtx, cancelWork := context.WithCancelCause(p.lease.Context())
	// The claims dispatch makes under fetchCtx are fenced by the lease: a claim cut short by a
	// shutdown is still settled, one cut short by the lease's end is not (see ledger.WithFence).
	p.fetchCtx, p.workCtx = ledger.WithFence(fetchCtx, p.lease.Context()), workCtx
	drainDone := make(chan struct{})
	drainExited := goDone(func() { p.drainTimer(drainDone, cancelWork) })
	return func() {
		close(drainDone)
		<-drainExited
		cancelWork(nil)
		stopFetchOnCtx()
		cancelFetch(nil)
		cancelStop()
	}
}

// drainTimer cancels workCtx with ErrStopped DrainTimeout after fetchCtx ends (shutdown or the
// stop time), so handlers get that long to finish.
func (p *pass) drainTimer(done <-chan struct{}, cancelWork context.CancelCauseFunc) {
	select {
	case <-p.fetchCtx.Done():
	case <-done:
		return
	}
	select {
	case <-p.w.cfg.Clock.After(p.w.cfg.DrainTimeout):
		cancelWork(ErrStopped)
	case <-done:
	case <-p.workCtx.Done():
	}
}

// openScanner creates the pass's scanner, resuming from the checkpoint when it fits the table and
// plan (otherwise the share is rescanned).
func (p *pass) openScanner() error {
	c := p.w.cfg
	scfg := scan.Config{
		Client: c.Client, Table: c.Table, Description: p.e.sourceDescription(c.Clock.Now()), Slot: p.lease.Slot(),
		Plan:          p.plan,
		PartitionAttr: c.PartitionAttr, IndexName: c.IndexName, ShardAttr: c.ShardAttr, Shards: c.Shards,
		ConsistentRead: c.ConsistentRead, Projection: p.projection(), ReadRate: c.ReadRate,
		PageLimit: c.PageSize, Resume: p.from.scan,
		OnCheckpoint: func(v string) { p.latest.Store(&v) },
	}
	p.share.scanConfig(p, &scfg)
	sc, err := scan.New(scfg)
	if err != nil && p.from.scan != "" && (errors.Is(err, scan.ErrCheckpointMismatch) || errors.Is(err, scan.ErrBadCheckpoint)) {
		c.Logger.Warn("dynapart: the slot's scan checkpoint does not fit this table or plan; rescanning the share", "err", err)
		scfg.Resume = ""
		sc, err = scan.New(scfg)
	}
	if err != nil {
		return err
	}
	p.sc = sc
	p.w.mu.Lock()
	p.w.scanner = sc
	p.w.mu.Unlock()
	return nil
}

// projection is Config.Projection plus what the ledger's prefilter reads (everything when
// Projection is empty).
func (p *pass) projection() []string {
	if len(p.w.cfg.Projection) == 0 {
		return nil
	}
	return append(slices.Clone(p.w.cfg.Projection), p.e.ledger.ScanAttrs()...)
}

// scanEnded adds a finished pass's read capacity to the worker's total, and warns once when a
// filter-mode pass read items of which none has PartitionAttr (all in partition 0: likely a
// misspelt attribute).
func (w *Worker) scanEnded(sc *scan.Scanner) {
	st := sc.Stats()
	w.mu.Lock()
	w.scanner = nil
	w.rcuDone += st.RCU
	w.mu.Unlock()
	if st.Unpartitioned > 0 && st.Partitioned == 0 && w.warnedPartition.CompareAndSwap(false, true) {
		w.cfg.Logger.Warn("dynapart: filter mode: no item read has the partition attribute, so every item went to partition 0 "+
			"(slot 0); is PartitionAttr (--partition-attr) spelt as the items spell it?", "partition_attr", w.cfg.PartitionAttr,
			"items_read", st.Unpartitioned)
	}
}

// scanAndHandle runs the scan and the loops that handle its items, and returns once all of them
// have returned: the handlers drain the tasks, the completer the completions, and the checkpoint
// saver stops last.
func (p *pass) scanAndHandle() error {
	saverStop := make(chan struct{})
	saverDone := goDone(func() { p.checkpointSaver(saverStop) })
	err := p.withHandlers(func() error { return p.sc.Run(p.fetchCtx, p.dispatch) })
	close(saverStop)
	<-saverDone
	return err
}

// withHandlers runs feed, which sends tasks, with the handler pool (and the completer of batched
// completions), and returns feed's error once every handler has returned.
func (p *pass) withHandlers(feed func() error) error {
	c := p.w.cfg
	p.tasks = make(chan task, c.Concurrency)
	completerDone := closedChan
	// With batched claims, successful items are completed in batches too, by one goroutine.
	if c.BatchClaims {
		p.completions = make(chan completion, completionQueue(c.Concurrency))
		completerDone = goDone(p.completer)
	}
	var handlers sync.WaitGroup
	for range c.Concurrency {
		handlers.Go(p.handlerLoop)
	}
	err := feed()
	close(p.tasks)
	handlers.Wait()
	if p.completions != nil {
		close(p.completions)
	}
	<-completerDone
	return err
}

// handlerLoop is one goroutine of the handler pool. While the group is paused it keeps taking
// tasks, so none waits in the queue holding a batch claim: it gives their claims back and holds
// them until the resume (see holdWhilePaused).
func (p *pass) handlerLoop() {
	var held []task
	for {
		var resumed <-chan struct{} // nil (never ready) while nothing is held
		if len(held) > 0 {
			resumed = p.w.pause.resumedChan()
		}
		select {
		case t, ok := <-p.tasks:
			if !ok {
				p.processAll(held) // each waits for the resume, or for the pass to stop
				return
			}
			if p.w.pause.flagged() {
				held = append(held, p.holdWhilePaused(t))
				continue
			}
			held = p.processAll(held)
			p.process(t)
		case <-resumed:
			held = p.processAll(held)
		}
	}
}

// current is the checkpoint the pass has reached.
func (p *pass) current() slotCheckpoint {
	f := p.from
	out := slotCheckpoint{epoch: f.epoch, n: f.n, run: f.run, pass: f.pass, scan: f.scan, counts: f.counts}
	if v := p.latest.Load(); v != nil {
		out.scan = *v
	}
	now := p.w.cfg.Clock.Now()
	working := now.Sub(p.startedAt) - (p.w.pause.pausedTime(now) - p.pausedAtStart)
	out.counts.elapsed += max(0, working).Truncate(time.Millisecond)
	out.counts.scanned += p.counts.scanned.Load()
	out.counts.done += p.counts.done.Load()
	out.counts.failed += p.counts.failed.Load()
	out.dirty = p.dirty.Load() // read after the position: see pass.dirty
	out.scan = p.share.position(out.scan)
	return out
}

// checkpointSaver saves the pass's checkpoint every CheckpointInterval while it changes.
func (p *pass) checkpointSaver(stop <-chan struct{}) {
	saved := p.from.withoutElapsed()
	for {
		select {
		case <-stop:
			return
		case <-p.w.cfg.Clock.After(p.w.cfg.CheckpointInterval):
		}
		// Working time alone passing is no reason to write.
		if cp := p.current(); cp.withoutElapsed() != saved {
			if err := p.save(cp); err == nil {
				saved = cp.withoutElapsed()
			}
		}
	}
}

// again marks the pass dirty: an item the pass cannot name needs another pass, due at due (a
// once-job's next pass rescans the share: see leftovers).
func (p *pass) again(due time.Time) { p.againKey(nil, due) }

// dirtyUnkeyed marks the pass dirty for items of another lease (a thief's), whose keys and due
// times it does not know: the next pass rescans the share, after PollInterval at the latest.
func (p *pass) dirtyUnkeyed() {
	p.left.add(nil)
	p.dirty.Store(true)
}

// againKey marks the pass dirty: the item of key needs another pass, due at due.
func (p *pass) againKey(key Key, due time.Time) {
	p.left.add(key)
	p.dirty.Store(true)
	p.mu.Lock()
	if p.nextDue.IsZero() || due.Before(p.nextDue) {
		p.nextDue = due
	}
	p.mu.Unlock()
}

// writeContext is for the ledger writes made for the slot (claim, complete, retry, dead letter,
// release): not cut short by a shutdown (the lease outlives the drain: it is released only after
// the pass has returned), bounded by WriteTimeout, and ended with the lease, so that neither the
// write nor the SDK's repeats of it are sent once the lease has ended (lost, expired by the
// holder's clock, or released). Such a write's outcome is unknown; it is settled by reads only,
// never by a new write (see ledger.WithFence).
func (p *pass) writeContext() (context.Context, context.CancelFunc) {
	lctx := p.lease.Context()
	ctx, cancel := context.WithTimeout(lctx, p.w.cfg.WriteTimeout)
	return ledger.WithFence(ctx, lctx), cancel
}

// leaseEnded reports whether the slot's lease has ended: nothing more may be written for it.
func (p *pass) leaseEnded() bool { return p.lease.Context().Err() != nil }

// goDone runs f in a goroutine and returns a channel closed when f returns.
func goDone(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// closedChan is a channel that is always closed.
var closedChan = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
