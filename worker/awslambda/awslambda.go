// Package awslambda runs a dynapart worker as an AWS Lambda function: one worker per invocation.
//
// Each invocation takes a slot (or stands by while all are held), works until the invocation's
// deadline minus worker.Config.DeadlineMargin, saves its checkpoint, releases its claims and slot,
// and returns a [Result] that says whether the whole job is finished, so a Step Functions loop or a
// schedule knows when to stop invoking. The next invocation resumes from the checkpoint.
//
//	func main() {
//		db := dynamodb.NewFromConfig(cfg)
//		lambda.Start(awslambda.Handler(worker.Config{Client: db, Table: "users", Workers: 8}, send))
//	}
package awslambda

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/dynapart/dynapart/worker"
)

// Result is what an invocation returns.
type Result struct {
	// Finished is true when every slot of the job's group is finished: stop invoking.
	Finished bool `json:"finished"`
	// Slot is the slot this invocation worked on, -1 when it held none.
	Slot int `json:"slot"`
	// Stats are this invocation's counters.
	Stats worker.Stats `json:"stats"`
}

// Handler returns a Lambda handler (for lambda.Start) that runs one once-mode worker per
// invocation. The invocation's payload is ignored. cfg.Once is forced on.
func Handler(cfg worker.Config, h worker.Handler) func(ctx context.Context, payload json.RawMessage) (Result, error) {
	cfg.Once = true
	return func(ctx context.Context, _ json.RawMessage) (Result, error) {
		w, err := worker.New(cfg)
		if err != nil {
			return Result{Slot: -1}, err
		}
		slot := -1
		hooks := cfg.Hooks
		// Remember the slot for the result; keep the caller's hooks.
		orig := hooks.OnLease
		c := w.Config()
		c.Hooks.OnLease = func(e worker.LeaseEvent) {
			if e.Kind == "acquired" {
				slot = e.Slot
			}
			if orig != nil {
				orig(e)
			}
		}
		if w, err = worker.New(c); err != nil {
			return Result{Slot: -1}, err
		}
		runErr := w.Run(ctx, h)
		res := Result{Slot: slot, Stats: w.Stats()}
		if runErr != nil && !errors.Is(runErr, context.DeadlineExceeded) {
			return res, runErr
		}
		// The deadline margin leaves time for this one read.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		fin, err := w.JobFinished(fctx)
		if err != nil {
			return res, err
		}
		res.Finished = fin
		return res, nil
	}
}
