package worker

import (
	"context"
	"sync/atomic"

	"github.com/dynapart/dynapart/lock"
)

type counters struct {
	scanned, claimed, skipped, completed, retried, deadLettered, released, claimLost, panics, unprocessable, abandoned atomic.Int64
	// follow mode (follow.go)
	followRecords, followHandled, followSuperseded, followUnchanged, followDeleted, followRescans atomic.Int64
	leases, takeovers, leasesLost, passes, stolen                                                 atomic.Int64
}

// State is what a Worker is doing (Stats.State).
type State string

// The states of a Worker.
const (
	StateIdle     State = "idle"     // made, Run not started yet
	StateStandby  State = "standby"  // waiting for a slot (hot standby)
	StateWorking  State = "working"  // holding a slot and processing its share
	StateFinished State = "finished" // every slot of the group is finished, or (Once) this one
)

// Stats is a snapshot of what a Worker has done since it was made.
type Stats struct {
	Slot  int   `json:"slot"`  // the slot held now, -1 when none
	Token int64 `json:"token"` // the lease token held now
	State State `json:"state"` // idle, standby, working, finished
	// Paused says the group is paused (dynapart pause) and this slot holder claims nothing: the
	// flag is set and no claim write of the worker is in flight. The slot is kept.
	Paused bool `json:"paused"`

	Scanned      int64 `json:"scanned"`       // items read from the slot's share (by key too: keyed passes)
	Claimed      int64 `json:"claimed"`       // claims won
	Skipped      int64 `json:"skipped"`       // items done, failed, held by another worker or not yet due
	Completed    int64 `json:"completed"`     // items this worker moved to done
	Retried      int64 `json:"retried"`       // failed attempts scheduled for a retry
	DeadLettered int64 `json:"dead_lettered"` // items moved to failed
	Released     int64 `json:"released"`      // claims given back at shutdown
	ClaimLost    int64 `json:"claim_lost"`    // completions refused because the claim was no longer current
	Panics       int64 `json:"panics"`        // recovered handler panics
	// Unprocessable counts items that could not be claimed at all (see OutcomeUnprocessable).
	Unprocessable int64 `json:"unprocessable"`
	// Abandoned counts handlers given up on after ignoring their cancelled context for
	// Config.HandlerGrace.
	Abandoned int64 `json:"abandoned"`

	Leases     int64 `json:"leases"`      // slot leases acquired
	Takeovers  int64 `json:"takeovers"`   // leases taken from a holder that had not released
	LeasesLost int64 `json:"leases_lost"` // leases lost while working
	Passes     int64 `json:"passes"`      // completed passes: scans of a share, and a once-job's keyed passes (keyedpass.go)
	// Stolen counts the scan units (segments, shards) this worker took from slots still working
	// and read to their end (see Config.NoSteal).
	Stolen int64 `json:"stolen"`
	// Follow is what following the table's stream did (Config.Follow); nil without it.
	Follow *FollowStats `json:"follow,omitempty"`

	// RCU is the read capacity consumed by the scans, by a once-job's reads of the items a pass
	// left, by key (keyed passes, keyedpass.go), by the worker's consistent reads of items
	// (a versioned worker's after a claim, a follower's of the items its records name:
	// FollowStats.RCU) and by the ledger's reads of state rows (Ledger.ConsumedRCU: the table
	// ledger's rows before complete-only handlers, after transacted claims, before a follower
	// handles a change), as DynamoDB reported it.
	RCU float64 `json:"rcu"`
	// WCU is the write capacity consumed by the ledger's writes, by DynamoDB's billing rules: every
	// write at least 1 WCU (also when its condition fails), an item of a transaction 2, more for an
	// item over 1 KB as DynamoDB reports it (asked of 1 write in 16 of each kind unless WriteRate is
	// set, the others estimated at the same cost: see ledger's capacityMeter).
	WCU float64 `json:"wcu"`
	// WriteThrottles counts the ledger's write attempts DynamoDB throttled (those the SDK retried
	// included, and transactions cancelled for throttling).
	WriteThrottles int64 `json:"write_throttles"`
	// WriteRateAllowed is the WCU per second Config.WriteRate allows now: WriteRate, or less for a
	// while after throttling. 0 when unlimited.
	WriteRateAllowed float64 `json:"write_rate_allowed"`
}

// Stats returns a snapshot of the worker's counters. Safe to call while Run runs.
func (w *Worker) Stats() Stats {
	s := &w.stats
	w.mu.Lock()
	out := Stats{Slot: w.slot, Token: w.token, State: w.state, RCU: w.rcuDone + w.itemRCU, Paused: w.pause.settled()}
	if w.scanner != nil {
		out.RCU += w.scanner.Stats().RCU
	}
	out.WCU, out.RCU = w.ledgerWCU, out.RCU+w.ledgerRCU
	if w.ledger != nil {
		out.WCU += w.ledger.ConsumedWCU()
		out.RCU += w.ledger.ConsumedRCU()
	}
	w.mu.Unlock()
	out.WriteThrottles, out.WriteRateAllowed = w.gate.Throttled(), w.gate.Allowed()
	out.Scanned, out.Claimed, out.Skipped = s.scanned.Load(), s.claimed.Load(), s.skipped.Load()
	out.Completed, out.Retried, out.DeadLettered = s.completed.Load(), s.retried.Load(), s.deadLettered.Load()
	out.Released, out.ClaimLost, out.Panics = s.released.Load(), s.claimLost.Load(), s.panics.Load()
	out.Unprocessable, out.Abandoned = s.unprocessable.Load(), s.abandoned.Load()
	out.Leases, out.Takeovers, out.LeasesLost, out.Passes = s.leases.Load(), s.takeovers.Load(), s.leasesLost.Load(), s.passes.Load()
	out.Stolen = s.stolen.Load()
	out.Follow = w.followStats()
	return out
}

// JobFinished reports whether every slot of the worker's group is marked finished (a once job is
// done). Lambda and schedulers use it to know when to stop invoking workers.
func (w *Worker) JobFinished(ctx context.Context) (bool, error) {
	locks, err := lock.New(w.cfg.Client, w.cfg.LeaseTable, lock.WithOwner(w.cfg.Owner), lock.WithClock(w.cfg.Clock))
	if err != nil {
		return false, err
	}
	st, err := locks.GroupStatus(ctx, w.cfg.Group)
	if err != nil {
		return false, err
	}
	return st.Finished(), nil
}
