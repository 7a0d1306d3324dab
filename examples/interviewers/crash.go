package main

import (
	"context"
	"fmt"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/worker"
)

// Tables are a worker run's tables: the updates inbox, the interviews and the lease table.
type Tables struct {
	Updates    string `json:"updates"`
	Interviews string `json:"interviews"`
	Leases     string `json:"leases"`
}

// ChildSpec is what a worker child runs.
type ChildSpec struct {
	Endpoint string `json:"endpoint"`
	Tables
	Mode    Mode                   `json:"mode"`
	Workers int                    `json:"workers"`
	Owner   string                 `json:"owner"`
	Crash   exampleutil.CrashPoint `json:"crash"`
}

// WorkerConfig is the configuration of the workers on the updates: both copies of an update in
// the same slot (filter mode by interview_id), one update at a time, short leases so that a dead
// or frozen worker's slot is taken over in about 2 s.
func WorkerConfig(db worker.DynamoDBClient, t Tables, workers int, owner string) worker.Config {
	return exampleutil.QuickTakeover(exampleutil.OneAtATimePer(attrInterview, worker.Config{
		Client: db, Table: t.Updates, LeaseTable: t.Leases, Workers: workers, Once: true, Owner: owner,
	}))
}

// RunChild runs one worker until the job is finished (or its parent kills it).
func RunChild(ctx context.Context, spec ChildSpec) error {
	cc, err := exampleutil.NewCrashClient(ctx, spec.Endpoint, spec.Crash, insertWrite(spec.Mode, spec.Interviews))
	if err != nil {
		return err
	}
	h, err := (&Store{DB: cc, Table: spec.Interviews}).Handler(spec.Mode, nil)
	if err != nil {
		return err
	}
	w, err := worker.New(WorkerConfig(cc, spec.Tables, spec.Workers, spec.Owner))
	if err != nil {
		return err
	}
	return w.Run(ctx, h)
}

// RunOutcome is what a worker run left.
type RunOutcome struct {
	Updates    int      // calendar updates (each delivered twice)
	Said       []string // what the interrupted workers said
	Rows       int      // interviewer rows
	Duplicates int      // interviews with more than one row
	Ledger     ledger.Summary
}

// StaleRun parks n updates (each delivered twice) and runs one slot of workers in mode, each a
// child process. The first worker's first insert (the naive handler's PutItem, the effects'
// commit) is held in the network and the worker frozen (SIGSTOP) until its lease expires; a
// second worker takes the slot over and does every update; then the first is thawed (SIGCONT),
// its write delivered late, and killed.
func StaleRun(ctx context.Context, db *dynamodb.Client, endpoint string, t Tables, mode Mode, n int) (RunOutcome, error) {
	out := RunOutcome{Updates: n}
	if err := WriteUpdates(ctx, db, t.Updates, "stale", n); err != nil {
		return out, err
	}
	spec := func(owner string, crash exampleutil.CrashPoint) ChildSpec {
		return ChildSpec{Endpoint: endpoint, Tables: t, Mode: mode, Workers: 1, Owner: owner, Crash: crash}
	}
	stale, err := exampleutil.StartChild(ctx, "stale worker", spec("stale", exampleutil.CrashPoint{N: 1, At: exampleutil.Held}))
	if err != nil {
		return out, err
	}
	defer stale.Kill()
	held, err := stale.Await(ctx, "held")
	if err != nil {
		return out, err
	}
	if err := stale.Signal(syscall.SIGSTOP); err != nil {
		return out, err
	}
	if err := exampleutil.RunToEnd(ctx, 1, func(int) any { return spec("successor", exampleutil.CrashPoint{}) }); err != nil {
		return out, err
	}
	if err := stale.Signal(syscall.SIGCONT); err != nil {
		return out, err
	}
	if err := stale.Send("release"); err != nil {
		return out, err
	}
	released, err := stale.Await(ctx, "released")
	if err != nil {
		return out, err
	}
	stale.Kill()
	out.Said = []string{held, released}
	return out, out.count(ctx, db, t, "stale")
}

// KillRun parks n updates (each delivered twice) and runs two slots of workers in mode, each a
// child process: two workers are SIGKILLed in the middle of an update (one after its 2nd insert
// landed, before it heard the answer; one before its 3rd insert is sent), and two fresh workers
// take over and finish.
func KillRun(ctx context.Context, db *dynamodb.Client, endpoint string, t Tables, mode Mode, n int) (RunOutcome, error) {
	out := RunOutcome{Updates: n}
	if err := WriteUpdates(ctx, db, t.Updates, "killed", n); err != nil {
		return out, err
	}
	spec := func(i int, crash exampleutil.CrashPoint) any {
		return ChildSpec{Endpoint: endpoint, Tables: t, Mode: mode, Workers: 2, Owner: fmt.Sprintf("worker-%d", i), Crash: crash}
	}
	victims := []exampleutil.CrashPoint{{N: 2, At: exampleutil.AfterLanded}, {N: 3, At: exampleutil.BeforeSend}}
	var err error
	if out.Said, err = exampleutil.KillAtCrashPoints(ctx, victims, spec); err != nil {
		return out, err
	}
	if err := exampleutil.RunToEnd(ctx, 2, func(i int) any { return spec(len(victims)+i, exampleutil.CrashPoint{}) }); err != nil {
		return out, err
	}
	return out, out.count(ctx, db, t, "killed")
}

// count reads the rows of the run's interviews and the updates' ledger.
func (o *RunOutcome) count(ctx context.Context, db *dynamodb.Client, t Tables, prefix string) error {
	s := &Store{DB: db, Table: t.Interviews}
	for i := range o.Updates {
		got, err := s.Interviewers(ctx, fmt.Sprintf("%s-%04d", prefix, i))
		if err != nil {
			return err
		}
		o.Rows += len(got)
		if len(got) > 1 {
			o.Duplicates++
		}
	}
	l, err := ledger.NewInline(db, t.Updates, []string{attrID})
	if err != nil {
		return err
	}
	o.Ledger, err = l.Summarize(ctx)
	return err
}
