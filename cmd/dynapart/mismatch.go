package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// workSettings names the `work` flag behind each worker.Config field, and the key under which a
// group records the setting in its meta (lock.GroupMismatchError.Field) when it does.
var workSettings = []struct{ field, meta, flag string }{
	{"Table", "meta.table", "--table"},
	{"Workers", "n", "--workers"},
	{"Mode", "meta.mode", "--mode"},
	{"SubSegments", "meta.sub_segments", "--sub-segments"},
	{"Segments", "meta.segments", "--segments"},
	{"PartitionAttr", "meta.partition_attr", "--partition-attr"},
	{"IndexName", "meta.index_name", "--index-name"},
	{"ShardAttr", "meta.shard_attr", "--shard-attr"},
	{"Shards", "meta.shards", "--shards"},
	{"Job", "meta.job", "--job"},
	{"Ledger", "meta.ledger", "--ledger"},
	{"LedgerTable", "meta.ledger_table", "--ledger-table"},
	{"AttrPrefix", "meta.attr_prefix", "--attr-prefix"},
	{"CompleteOnly", "meta.complete_only", "--complete-only"},
	{"BatchClaims", "", "--batch-claims"},
	{"LeaseTable", "", "--lease-table"},
	{"Group", "", "--group"},
	{"ConsistentRead", "", "--consistent-read"},
	{"ReadRate", "", "--read-rate"},
	{"WriteRate", "", "--write-rate"},
	{"PageSize", "", "--page-size"},
	{"Concurrency", "", "--concurrency"},
	{"LeaseTTL", "", "--lease-ttl"},
	{"Heartbeat", "", "--heartbeat"},
	{"StandbyPoll", "", "--standby-poll"},
	{"MaxClockSkew", "", "--max-clock-skew"},
	{"ClaimTTL", "", "--claim-ttl"},
	{"MaxAttempts", "", "--max-attempts"},
	{"RetryBackoff", "", "--retry-backoff"},
	{"Once", "", "--once"},
	{"PollInterval", "", "--poll-interval"},
	{"DrainTimeout", "", "--drain-timeout"},
	{"Owner", "", "--owner"},
}

// flagOfField is the `work` flag of a worker.Config field, or "" when it has none.
func flagOfField(field string) string {
	for _, s := range workSettings {
		if s.field == field {
			return s.flag
		}
	}
	return ""
}

// flagOfMeta is the `work` flag of a group meta setting (--attr-prefix for meta.attr_prefix).
func flagOfMeta(meta string) string {
	for _, s := range workSettings {
		if s.meta == meta && meta != "" {
			return s.flag
		}
	}
	return "--" + strings.ReplaceAll(strings.TrimPrefix(meta, "meta."), "_", "-")
}

// configFlagError is a worker.Config field the library refused, named by its flag: a usage error
// (exit 2, nothing written).
type configFlagError struct {
	Flag string // "" when the field has no flag
	err  *worker.ConfigError
}

func (e *configFlagError) Error() string {
	if e.Flag == "" {
		return e.err.Error()
	}
	return fmt.Sprintf("%s: %s (worker.Config.%s)", e.Flag, e.err.Reason, e.err.Field)
}

func (e *configFlagError) Unwrap() error { return e.err }

// groupMismatchError is a worker refused by its group: a usage error (exit 2, nothing written)
// whose message names the flag that differs.
type groupMismatchError struct {
	Flag string
	err  *lock.GroupMismatchError
}

func (e *groupMismatchError) Error() string {
	if e.err.Field == "n" {
		return fmt.Sprintf("%s %s differs from group %q, which has %s slots: leave --workers out to join the group "+
			"at its size, or change the size with 'dynapart scale --group %s --workers %s'", e.Flag, e.err.Want,
			e.err.Group, e.err.Have, e.err.Group, e.err.Want)
	}
	return fmt.Sprintf("%s %q differs from group %q, which was set up with %q: every worker of a group must "+
		"agree on it (use a new --group to change it)", e.Flag, e.err.Want, e.err.Group, e.err.Have)
}

func (e *groupMismatchError) Unwrap() error { return e.err }

// explainSetting names the flag of a worker setting in err: a *worker.ConfigError becomes a
// configFlagError, a *lock.GroupMismatchError a groupMismatchError; other errors are returned as
// they are.
func explainSetting(err error) error {
	var ce *worker.ConfigError
	if errors.As(err, &ce) {
		return &configFlagError{Flag: flagOfField(ce.Field), err: ce}
	}
	return explainMismatch(err)
}

// explainMismatch turns a *lock.GroupMismatchError into a groupMismatchError naming the flag;
// other errors are returned as they are.
func explainMismatch(err error) error {
	var gm *lock.GroupMismatchError
	if !errors.As(err, &gm) {
		return err
	}
	return &groupMismatchError{Flag: flagOfMeta(gm.Field), err: gm}
}
