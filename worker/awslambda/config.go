package awslambda

import (
	"fmt"
	"time"

	"github.com/dynapart/dynapart/worker"
)

// MaxReleaseTime bounds the part of worker.Config.DeadlineMargin kept after the drain, for
// releasing the claims of handlers cut off, saving the checkpoint, releasing the slot and reading
// whether the job is finished, all before the invocation's deadline: half the margin, at most
// MaxReleaseTime (1s of the default 2s margin).
const MaxReleaseTime = time.Second

// releaseTime is the part of margin kept after the drain.
func releaseTime(margin time.Duration) time.Duration { return min(margin/2, MaxReleaseTime) }

// DefaultDeadlineMargin is the adapter's worker.Config.DeadlineMargin when none is set.
const DefaultDeadlineMargin = 2 * time.Second

// lambdaConfig fits cfg to one invocation: Once is forced on; DeadlineMargin defaults to
// DefaultDeadlineMargin; DrainTimeout defaults to DeadlineMargin minus the release time (1s by
// default), and a DrainTimeout that leaves less than the release time of the margin is a
// *worker.ConfigError. So claiming stops at the deadline minus DeadlineMargin, handlers still
// running are cancelled DrainTimeout later, and the release time is left for the rest.
func lambdaConfig(cfg worker.Config) (worker.Config, error) {
	cfg.Once = true
	if cfg.DeadlineMargin == 0 {
		cfg.DeadlineMargin = DefaultDeadlineMargin
	}
	if cfg.DeadlineMargin < 10*time.Millisecond {
		return cfg, &worker.ConfigError{Field: "DeadlineMargin", Reason: fmt.Sprintf(
			"must be at least 10ms in a Lambda function (time to drain and release), got %s", cfg.DeadlineMargin)}
	}
	rel := releaseTime(cfg.DeadlineMargin)
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = cfg.DeadlineMargin - rel
	}
	if cfg.DrainTimeout > cfg.DeadlineMargin-rel {
		return cfg, &worker.ConfigError{Field: "DrainTimeout", Reason: fmt.Sprintf(
			"plus the release time (%s) must fit in DeadlineMargin (%s) in a Lambda function, got %s",
			rel, cfg.DeadlineMargin, cfg.DrainTimeout)}
	}
	return cfg, nil
}
