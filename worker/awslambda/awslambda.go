// Package awslambda runs a dynapart worker as an AWS Lambda function: one worker per invocation.
//
// Each invocation takes a slot (or stands by while all are held), works until the invocation's
// deadline minus worker.Config.DeadlineMargin, lets handlers in flight finish for DrainTimeout,
// then (within the rest of the margin, before the deadline) saves its checkpoint, releases its claims and slot,
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
// invocation. The invocation's payload is ignored. cfg.Once is forced on, and the drain is fitted
// into the deadline margin (see MaxReleaseTime): DeadlineMargin defaults to 2s and DrainTimeout to
// DeadlineMargin minus the release time; a DrainTimeout that does not fit makes every invocation return a
// *worker.ConfigError.
func Handler(cfg worker.Config, h worker.Handler) func(ctx context.Context, payload json.RawMessage) (Result, error) {
	return func(ctx context.Context, _ json.RawMessage) (Result, error) {
		c, err := lambdaConfig(cfg)
		if err != nil {
			return Result{Slot: -1}, err
		}
		slot := -1
		// Remember the slot for the result; keep the caller's hooks.
		orig := c.Hooks.OnLease
		c.Hooks.OnLease = func(e worker.LeaseEvent) {
			if e.Kind == "acquired" {
				slot = e.Slot
			}
			if orig != nil {
				orig(e)
			}
		}
		w, err := worker.New(c)
		if err != nil {
			return Result{Slot: -1}, err
		}
		runErr := w.Run(ctx, h)
		res := Result{Slot: slot, Stats: w.Stats()}
		if runErr != nil && !errors.Is(runErr, context.DeadlineExceeded) {
			return res, runErr
		}
		// Within the rest of the margin, and never past the invocation's deadline. When the
		// deadline comes first, Finished stays false: the next invocation finds the group
		// finished at once and says so.
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		fin, err := w.JobFinished(fctx)
		if err != nil && ctx.Err() != nil {
			w.Config().Logger.Warn("dynapart: the deadline came before the job's state could be read", "err", err)
			return res, nil
		}
		if err != nil {
			return res, err
		}
		res.Finished = fin
		return res, nil
	}
}
