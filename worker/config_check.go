package worker

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// This file fills a Config's defaults and checks it: New calls both, and a *ConfigError names
// the field that is wrong.

func (c *Config) withDefaults() Config {
	d := *c
	applyDefaults(&d) // the table's defaults (Settings); the computed ones follow
	setDefault(&d.Group, d.Table+"/"+d.Job)
	if d.ReadRate == 0 {
		setDefault(&d.PageSize, 1000)
	}
	setDefault(&d.Heartbeat, d.LeaseTTL/3)
	if d.Once {
		setDefault(&d.PollInterval, 5*time.Second)
	}
	setDefault(&d.PollInterval, 30*time.Second)
	setDefault(&d.Owner, lock.DefaultOwner())
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Clock == nil {
		d.Clock = lock.SystemClock{}
	}
	d.Versions = d.Versions || d.Follow
	return d
}

// setDefault sets *v to def when *v is its zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// configErr is a *ConfigError of the worker's Config.
func configErr(field, format string, args ...any) error {
	return &ConfigError{Pkg: "dynapart", Field: field, Reason: fmt.Sprintf(format, args...)}
}

func (c *Config) validate() error {
	bad := configErr
	switch {
	case c.Client == nil:
		return bad("Client", "required")
	case c.Table == "":
		return bad("Table", "required")
	case c.Workers < 0:
		return bad("Workers", "must be at least 1 (or 0: join the group at its current size), got %d", c.Workers)
	case !(c.ReadRate >= 0) || math.IsInf(c.ReadRate, 1): // NaN fails every comparison
		return bad("ReadRate", "must be a finite number >= 0, got %g", c.ReadRate)
	case !(c.WriteRate >= 0) || math.IsInf(c.WriteRate, 1):
		return bad("WriteRate", "must be a finite number >= 0 (0: unlimited), got %g", c.WriteRate)
	case !(c.MaxWCU >= 0) || math.IsInf(c.MaxWCU, 1):
		return bad("MaxWCU", "must be a finite number >= 0 (0: no budget), got %g", c.MaxWCU)
	case !(c.MaxRCU >= 0) || math.IsInf(c.MaxRCU, 1):
		return bad("MaxRCU", "must be a finite number >= 0 (0: no budget), got %g", c.MaxRCU)
	case c.BudgetInterval < 0:
		return bad("BudgetInterval", "must be >= 0, got %s", c.BudgetInterval)
	case c.PageSize < 0:
		return bad("PageSize", "must not be negative, got %d", c.PageSize)
	case c.SubSegments < 1 || c.SubSegments > maxSegments:
		return bad("SubSegments", "must be in [1, %d], got %d", maxSegments, c.SubSegments)
	case c.Concurrency < 1 || c.Concurrency > maxConcurrency:
		return bad("Concurrency", "must be in [1, %d], got %d", maxConcurrency, c.Concurrency)
	// The lease rules of lock.New, checked here so that Run does not fail on them; lock.New reads a
	// negative heartbeat as unset, and 2*Heartbeat may overflow.
	case c.LeaseTTL <= 0:
		return bad("LeaseTTL", "must be positive, got %s", c.LeaseTTL)
	case c.Heartbeat <= 0:
		return bad("Heartbeat", "must be positive, got %s (unset, it is LeaseTTL / 3)", c.Heartbeat)
	case c.LeaseTTL-c.Heartbeat <= c.Heartbeat:
		return bad("LeaseTTL", "must exceed 2 x Heartbeat (%s), got %s", c.Heartbeat, c.LeaseTTL)
	case c.MaxClockSkew < 0:
		return bad("MaxClockSkew", "must not be negative, got %s", c.MaxClockSkew)
	case c.MaxClockSkew >= c.LeaseTTL-c.Heartbeat:
		// The holder stops MaxClockSkew before expiry; it must still hold the lease at the first renewal.
		return bad("MaxClockSkew", "plus Heartbeat (%s) must be less than LeaseTTL (%s), got %s", c.Heartbeat, c.LeaseTTL, c.MaxClockSkew)
	case c.StandbyPoll <= 0:
		return bad("StandbyPoll", "must be positive, got %s", c.StandbyPoll)
	case c.ClaimTTL < time.Second:
		return bad("ClaimTTL", "must be at least 1s, got %s", c.ClaimTTL)
	case c.MaxAttempts < 1:
		return bad("MaxAttempts", "must be at least 1, got %d", c.MaxAttempts)
	case c.RetryBackoff < 0 || c.MaxRetryBackoff < c.RetryBackoff:
		return bad("RetryBackoff", "must be >= 0 and <= MaxRetryBackoff (%s), got %s", c.MaxRetryBackoff, c.RetryBackoff)
	case c.Ledger != LedgerInline && c.Ledger != LedgerTable:
		return bad("Ledger", "must be %q or %q, got %q", LedgerInline, LedgerTable, c.Ledger)
	case c.Ledger == LedgerTable && c.LedgerTable == c.Table:
		return bad("LedgerTable", "must differ from Table %q", c.Table)
	case c.LeaseTable == c.Table:
		return bad("LeaseTable", "must differ from Table %q", c.Table)
	case c.CompleteOnly && c.BatchClaims:
		return bad("BatchClaims", "cannot be combined with CompleteOnly (complete-only makes no claims)")
	case c.DrainTimeout < 0:
		return bad("DrainTimeout", "must not be negative, got %s", c.DrainTimeout)
	case c.HandlerGrace < 0:
		return bad("HandlerGrace", "must not be negative, got %s", c.HandlerGrace)
	case c.DeadlineMargin < 0:
		return bad("DeadlineMargin", "must not be negative, got %s", c.DeadlineMargin)
	case c.WriteTimeout < 0:
		return bad("WriteTimeout", "must not be negative, got %s", c.WriteTimeout)
	case c.LeaseWriteTimeout < 0:
		return bad("LeaseWriteTimeout", "must not be negative, got %s", c.LeaseWriteTimeout)
	case c.PollInterval < 0:
		return bad("PollInterval", "must not be negative, got %s", c.PollInterval)
	case c.CheckpointInterval <= 0:
		return bad("CheckpointInterval", "must be positive, got %s", c.CheckpointInterval)
	}
	if err := c.validateFollow(); err != nil {
		return err
	}
	return c.validatePlan()
}

// validateFollow checks what Follow needs.
func (c *Config) validateFollow() error {
	bad := configErr
	if c.Versions && len(c.Projection) > 0 {
		return bad("Versions", "a version is every attribute of the item: leave out Projection")
	}
	switch {
	case !c.Follow:
		return nil
	case c.Once:
		return bad("Follow", "cannot be combined with Once (--once): a once-job ends after its pass, a follower goes on")
	case c.Mode == scan.ModeIndex:
		return bad("Follow", "follows the stream after a segment or filter mode pass, not in index mode")
	case c.Streams == nil:
		return bad("Streams", "required with Follow (a *dynamodbstreams.Client)")
	case c.StreamPoll <= 0:
		return bad("StreamPoll", "must be positive, got %s", c.StreamPoll)
	}
	return nil
}

// validatePlan checks the scan plan: what scan.New checks, here so that Run does not fail on it
// after taking a lease.
func (c *Config) validatePlan() error {
	bad := configErr
	if _, err := scan.ParseMode(string(c.Mode)); err != nil {
		return bad("Mode", "%v", err)
	}
	// What scan.New checks, here so that Run does not fail on it after taking a lease.
	if c.Mode == scan.ModeIndex {
		switch {
		case c.Shards < c.Workers:
			return bad("Shards", "must be at least Workers (%d) in index mode, got %d", c.Workers, c.Shards)
		case c.Shards > maxSegments:
			return bad("Shards", "must be at most %d, got %d", maxSegments, c.Shards)
		case c.ConsistentRead:
			return bad("ConsistentRead", "not available in index mode (global secondary indexes are eventually consistent)")
		}
		return nil
	}
	switch {
	case c.Segments < 0 || c.Segments > maxSegments:
		return bad("Segments", "must be in [1, %d] (0: the group's, or the default), got %d", maxSegments, c.Segments)
	case c.Segments > 0 && c.Mode == scan.ModeSegment && c.Segments < c.Workers:
		return bad("Segments", "must be at least Workers (%d) in segment mode (a slot without a segment has nothing to read), got %d", c.Workers, c.Segments)
	case c.Segments == 0 && c.Workers > maxSegments/c.SubSegments:
		return bad("SubSegments", "Workers (%d) x SubSegments (%d) must be at most %d", c.Workers, c.SubSegments, maxSegments)
	}
	return nil
}

// maxConcurrency bounds Concurrency: Run sizes buffers by it, and far beyond this a worker only
// queues handlers behind DynamoDB's per-partition limits.
const maxConcurrency = 100_000

// maxSegments is DynamoDB's limit on a scan's TotalSegments (Workers x SubSegments), which scan
// also applies to Shards and SubSegments alone.
const maxSegments = 1_000_000
