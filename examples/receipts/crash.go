package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// A crash run: the receipts parked in an inbox table and consumed by dynapart workers, each a
// child process of this program (exampleutil.StartChild), two of which are SIGKILLed in the
// middle of a receipt. The same run, the same kills, three handlers: the plain optimistic
// apply, the pessimistic one, and the effects.

// Tables are a crash run's tables: the inbox (empty at the start), the state table (empty) and
// the lease table.
type Tables struct {
	Inbox  string `json:"inbox"`
	State  string `json:"state"`
	Leases string `json:"leases"`
}

// ChildSpec is what a worker child of a crash run runs.
type ChildSpec struct {
	Endpoint string `json:"endpoint"`
	Tables
	Mode  Mode                   `json:"mode"`
	Owner string                 `json:"owner"`
	Crash exampleutil.CrashPoint `json:"crash"`
}

// workerConfig is every crash-run worker's configuration.
func workerConfig(db worker.DynamoDBClient, t Tables, owner string) worker.Config {
	// Every receipt of a message goes to the same slot, and a slot handles one receipt at a time:
	// a receipt's read of the message is not overtaken by another receipt's write.
	return exampleutil.QuickTakeover(exampleutil.OneAtATimePer(attrMessage, worker.Config{
		Client: db, Table: t.Inbox, LeaseTable: t.Leases, Workers: 2, Once: true, Owner: owner,
	}))
}

// RunChild runs one worker of a crash run until the job is finished (or the parent kills it at
// its crash point: the plain and pessimistic versions' status write that landed, or the effects'
// commit).
func RunChild(ctx context.Context, spec ChildSpec) error {
	match := statusWrite(spec.State)
	if spec.Mode == Effects {
		match = commitWrite(spec.State)
	}
	cc, err := exampleutil.NewCrashClient(ctx, spec.Endpoint, spec.Crash, match)
	if err != nil {
		return err
	}
	locks, err := lock.New(cc, spec.Leases, lock.WithPollInterval(10*time.Millisecond), lock.WithLeaseTTL(exampleutil.TakeoverTTL),
		lock.WithOwner(spec.Owner))
	if err != nil {
		return err
	}
	h, err := (&Store{DB: cc, Table: spec.State}).Handler(spec.Mode, locks)
	if err != nil {
		return err
	}
	w, err := worker.New(workerConfig(cc, spec.Tables, spec.Owner))
	if err != nil {
		return err
	}
	return w.Run(ctx, h)
}

// CrashOutcome is what a crash run left.
type CrashOutcome struct {
	Receipts int
	Kills    []string // what each killed worker said at its crash point
	// WrongStatus messages are not at their highest receipt; WrongCounters funnel counters
	// differ; Missing counts the counters lack, Extra counts they have twice (see Miscount).
	WrongStatus, WrongCounters, Missing, Extra int
	Ledger                                     ledger.Summary // the inbox's receipts by state
}

// victims are the crash points of the two workers killed: the second commit (or status write) that
// landed, its answer lost; and for the effects the fourth commit before it is sent, for the
// others the fourth status write that landed, before the funnel's write.
func victims(mode Mode) []exampleutil.CrashPoint {
	second := exampleutil.CrashPoint{N: 4, At: exampleutil.AfterLanded}
	if mode == Effects {
		second.At = exampleutil.BeforeSend
	}
	return []exampleutil.CrashPoint{{N: 2, At: exampleutil.AfterLanded}, second}
}

// CrashRun parks the receipts in t.Inbox and consumes them with dynapart workers in mode, each a
// child process of this program: two workers start and each is SIGKILLed at its crash point, in
// the middle of a receipt; two fresh workers take their slots over once the leases expire and
// finish the job. Then it checks the state table against the receipts.
func CrashRun(ctx context.Context, db *dynamodb.Client, endpoint string, t Tables, mode Mode, batches [][]Event) (CrashOutcome, error) {
	var out CrashOutcome
	if err := WriteInbox(ctx, db, t.Inbox, batches); err != nil {
		return out, err
	}
	for _, b := range batches {
		out.Receipts += len(b)
	}
	spec := func(i int, crash exampleutil.CrashPoint) ChildSpec {
		return ChildSpec{Endpoint: endpoint, Tables: t, Mode: mode, Owner: fmt.Sprintf("%s-worker-%d", mode, i), Crash: crash}
	}
	var err error
	if out.Kills, err = exampleutil.KillAtCrashPoints(ctx, victims(mode), func(i int, cp exampleutil.CrashPoint) any { return spec(i, cp) }); err != nil {
		return out, err
	}
	if err := exampleutil.RunToEnd(ctx, 2, func(i int) any { return spec(len(out.Kills)+i, exampleutil.CrashPoint{}) }); err != nil {
		return out, err
	}
	st, err := (&Store{DB: db, Table: t.State}).ReadState(ctx)
	if err != nil {
		return out, err
	}
	out.WrongStatus, out.WrongCounters = Check(st, batches)
	out.Missing, out.Extra = Miscount(st, batches)
	l, err := ledger.NewInline(db, t.Inbox, []string{attrID})
	if err != nil {
		return out, err
	}
	out.Ledger, err = l.Summarize(ctx)
	return out, err
}
