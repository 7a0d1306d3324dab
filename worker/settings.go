package worker

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/dynapart/dynapart/scan"
)

// Setting is one field of [Config] as a fleet of workers sets it: its default, its flag in
// `dynapart work`, and, for a setting every worker of a group must agree on, how the group records
// it. [Settings] is the one table of them, from which the Config defaults, the group's meta item,
// the CLI's flags and the names in its errors, and the Groups list of the package doc derive:
// adding a setting is a Config field and a row.
type Setting struct {
	// Field is the Config field ("LeaseTTL").
	Field string
	// Flag is the `dynapart work` flag, without "--" ("lease-ttl"); "" when the CLI has none.
	Flag string
	// GroupField is how the group records a setting its workers must agree on, as the Field of a
	// *lock.GroupMismatchError names it when a worker disagrees: "n" for the group's size (lock's
	// own), "meta.<key>" for a key of the group's meta item; "" for a setting each worker chooses.
	GroupField string
	// Scope is where the setting applies; the meta item records it only there.
	Scope Scope
	// AddedLater marks a meta key recorded since after the first release: a group whose meta item
	// lacks it (set up by an older version) is taken to have used the default.
	AddedLater bool
	// AnyIfMissing, with AddedLater, makes a group whose meta item lacks the key take workers of
	// any value for it, as it did before the key was recorded (lock.AnyValue).
	AnyIfMissing bool
	// Default is the value an unset (zero) field takes, of the field's type; nil when the default
	// is the zero value or is computed from other fields (Help says how).
	Default any
	// ZeroMeans says, for a default computed from other fields (Default nil), what an unset field
	// stands for ("lease-ttl/3"): the CLI refuses its flag given as zero, naming it, as it does
	// one with a Default. "" when zero is a value of its own (ReadRate: unlimited).
	ZeroMeans string
	// Help is the flag's help text.
	Help string
}

// Scope is where a setting applies: in the modes listed (every mode when none) with the ledger
// named (either when "").
type Scope struct {
	Modes  []scan.Mode
	Ledger LedgerKind
}

// Covers reports whether the setting applies to c.
func (s Scope) Covers(c Config) bool {
	return (len(s.Modes) == 0 || slices.Contains(s.Modes, c.Mode)) && (s.Ledger == "" || s.Ledger == c.Ledger)
}

// String says where the setting applies: "always", "index mode", "segment and filter mode",
// "inline ledger".
func (s Scope) String() string {
	var parts []string
	if len(s.Modes) > 0 {
		modes := make([]string, len(s.Modes))
		for i, m := range s.Modes {
			modes[i] = string(m)
		}
		parts = append(parts, strings.Join(modes, " and ")+" mode")
	}
	if s.Ledger != "" {
		parts = append(parts, string(s.Ledger)+" ledger")
	}
	if len(parts) == 0 {
		return "always"
	}
	return strings.Join(parts, ", ")
}

// Settings returns the table of settings, in the order of Config's fields. Every field of Config
// but Client, Logger, Clock and Hooks has a row.
func Settings() []Setting { return slices.Clone(settings) }

var (
	segmentScan = Scope{Modes: []scan.Mode{scan.ModeSegment, scan.ModeFilter}}
	filterMode  = Scope{Modes: []scan.Mode{scan.ModeFilter}}
	indexMode   = Scope{Modes: []scan.Mode{scan.ModeIndex}}
)

var settings = []Setting{
	{Field: "Table", Flag: "table", GroupField: "meta.table", Help: "source table (required)"},
	{Field: "LeaseTable", Flag: "lease-table", Default: DefaultLeaseTable, Help: "lease table"},
	{Field: "Group", Flag: "group", ZeroMeans: "TABLE/JOB", Help: "lease group the workers share (default TABLE/JOB)"},
	{Field: "Workers", Flag: "workers", GroupField: "n",
		Help: "number of slots N of a new group (extra workers stand by); leave it out to join an existing group at its current N"},
	{Field: "Segments", Flag: "segments", GroupField: "meta.segments", Scope: segmentScan,
		ZeroMeans: "the group's, for a new group the smallest multiple of workers x sub-segments >= 64",
		Help: "segment and filter mode: the group's fixed number of scan segments, set when the group is created; " +
			"the group can be scaled up to that many slots (default: the group's, for a new group the smallest multiple of workers x sub-segments >= 64)"},

	{Field: "Mode", Flag: "mode", GroupField: "meta.mode", Default: scan.ModeSegment,
		Help: "how a slot finds its share: segment (parallel scan), filter (partition function), index (pending index)"},
	{Field: "SubSegments", Flag: "sub-segments", GroupField: "meta.sub_segments", Default: scan.DefaultSubSegments,
		Help: "scan requests a slot has in flight (its segments are read that many at a time); the group's, set when the group is created"},
	{Field: "PartitionAttr", Flag: "partition-attr", GroupField: "meta.partition_attr", Scope: filterMode,
		ZeroMeans: "the table's partition key",
		Help:      "filter mode: attribute to partition by (default the table's partition key)"},
	{Field: "IndexName", Flag: "index-name", GroupField: "meta.index_name", Scope: indexMode, AddedLater: true,
		Default: "dp_pending", Help: "index mode: the pending index"},
	{Field: "ShardAttr", Flag: "shard-attr", GroupField: "meta.shard_attr", Scope: indexMode, AddedLater: true,
		Default: "dp_shard", Help: "index mode: the shard attribute"},
	{Field: "Shards", Flag: "shards", GroupField: "meta.shards", Scope: indexMode, Default: 16,
		Help: "index mode: number of shards (>= workers)"},
	{Field: "ConsistentRead", Flag: "consistent-read", Scope: segmentScan, Help: "strongly consistent scans"},
	{Field: "Projection"},
	{Field: "ReadRate", Flag: "read-rate", Help: "limit this worker's scan to so many RCU per second (0 = unlimited)"},
	{Field: "WriteRate", Flag: "write-rate",
		Help: "limit this worker's ledger writes (claims, completions, retries, dead letters, releases) to so many WCU per second, " +
			"backing off when throttled (default unlimited; must be > 0 when given)"},
	{Field: "MaxWCU", Flag: "max-wcu",
		Help: "budget: the write units the group's workers may consume in all; reached, the group pauses itself (raise it with resume --max-wcu)"},
	{Field: "MaxRCU", Flag: "max-rcu",
		Help: "budget: the read units (scans, item reads, the table ledger's row reads) the group's workers may consume in all; reached, the group pauses itself (raise it with resume --max-rcu)"},
	{Field: "BudgetInterval", Flag: "budget-interval", Default: 5 * time.Second,
		Help: "how often each slot holder adds its consumption to the group's budget (one write; only while the group has a budget; shorter than --heartbeat, the holder reads the group that often too, at most every 250ms), and once more as the worker ends"},
	// PageSize defaults to 1000, or to the scan package's automatic size when ReadRate is set.
	{Field: "PageSize", Flag: "page-size", Help: "items per scan request; smaller pages checkpoint more often"},

	{Field: "Concurrency", Flag: "concurrency", Default: 16, Help: "handlers in flight"},
	{Field: "BatchClaims", Flag: "batch-claims", Help: "claim and complete up to 25 items of a page in one request (a PartiQL statement batch, 1 WCU per item)"},
	{Field: "TransactionBatches", Flag: "transaction-batches",
		Help: "write --batch-claims' batches as transactions (2 WCU per item), for a DynamoDB without PartiQL conditions such as moto"},
	{Field: "CompleteOnly", Flag: "complete-only", GroupField: "meta.complete_only", AddedLater: true,
		Help: "no claim: handle, then complete with one conditional write"},
	{Field: "CompleteOnlyAudit"},

	{Field: "LeaseTTL", Flag: "lease-ttl", Default: 10 * time.Second,
		Help: "slot lease time to live; a dead worker's slot is taken over after it"},
	{Field: "Heartbeat", Flag: "heartbeat", ZeroMeans: "lease-ttl/3", Help: "lease renewal interval (default lease-ttl/3)"},
	{Field: "MaxClockSkew", Flag: "max-clock-skew", Default: time.Second,
		Help: "clock difference tolerated between workers (added to the wait before a takeover, taken from the due time of an item reopened for a new version or given back)"},
	{Field: "StandbyPoll", Flag: "standby-poll", Default: time.Second,
		Help: "how often a standby looks for a free slot (jittered; also just after a lease it saw runs out)"},
	{Field: "ClaimTTL", Flag: "claim-ttl", Default: time.Minute, Help: "how long a claim protects an item (handler time limit)"},
	{Field: "MaxAttempts", Flag: "max-attempts", Default: 5, Help: "attempts before an item is dead-lettered"},
	{Field: "RetryBackoff", Flag: "retry-backoff", Default: time.Second,
		Help: "delay before the second attempt (doubles per attempt, max 5m)"},
	{Field: "MaxRetryBackoff", Default: 5 * time.Minute},

	{Field: "Once", Flag: "once", GroupField: "meta.once", AddedLater: true, AnyIfMissing: true,
		Help: "process the share once and exit (default: continuous)"},
	{Field: "NoSteal", Flag: "no-steal",
		Help: "with --once: do not take units from slots still working once this worker's slot is finished"},
	{Field: "Follow", Flag: "follow",
		Help: "continuous, segment or filter mode: after the share's first full pass, follow the table's stream (dynapart init --stream) instead of scanning again; every new version of an item is handled once (implies --versions)"},
	{Field: "Versions", Flag: "versions", GroupField: "meta.versions", AddedLater: true,
		Help: "record each finished item's content version, so that a stream tail (--follow, or a Lambda stream handler) does not handle again what this job handled; a claimed item's handler gets its content as of the claim (the table ledger and --batch-claims read it once more)"},
	{Field: "Streams"},
	{Field: "StreamPoll", Flag: "stream-poll", Default: time.Second,
		Help: "with --follow: how often a shard with nothing new is read again (the time from a write to its handler is about this)"},
	{Field: "PollInterval", Flag: "poll-interval", ZeroMeans: "30s continuous, 5s once", Help: "pause between passes (default 30s continuous, 5s once)"},
	{Field: "CheckpointInterval", Default: time.Second},
	{Field: "OutageTimeout", Flag: "outage-timeout", Default: DefaultOutageTimeout,
		Help: "how long a slot holder retries passes that fail (DynamoDB unreachable or throttled, or refusing a ledger write or an effect commit for every item: AccessDenied, a table gone), a starting worker its start reads, and a finishing --once worker its reads of the group while it watches held slots, before the worker exits with the last error (a success starts the count again); negative: for ever"},
	{Field: "DrainTimeout", Flag: "drain-timeout", Default: 10 * time.Second,
		Help: "on SIGTERM, how long handlers in flight may finish"},
	{Field: "HandlerGrace", Default: 5 * time.Second},
	{Field: "DeadlineMargin", Default: 2 * time.Second},
	{Field: "WriteTimeout", Default: DefaultWriteTimeout},
	{Field: "LeaseWriteTimeout", Default: DefaultLeaseWriteTimeout},

	{Field: "Job", Flag: "job", GroupField: "meta.job", Default: "default",
		Help: "job name; with --ledger table a new job processes every item again"},
	{Field: "Ledger", Flag: "ledger", GroupField: "meta.ledger", Default: LedgerInline,
		Help: "where item state lives: inline (attributes on the item) or table (a ledger table)"},
	{Field: "LedgerTable", Flag: "ledger-table", GroupField: "meta.ledger_table", Scope: Scope{Ledger: LedgerTable},
		AddedLater: true, Default: DefaultLedgerTable, Help: "ledger table for --ledger table"},
	{Field: "AttrPrefix", Flag: "attr-prefix", GroupField: "meta.attr_prefix", Scope: Scope{Ledger: LedgerInline},
		AddedLater: true, Default: DefaultAttrPrefix, Help: "inline ledger attribute prefix"},

	{Field: "Owner", Flag: "owner", ZeroMeans: "hostname-pid-random", Help: "worker id in leases and claims (default hostname-pid-random)"},
}

// applyDefaults sets every zero field of c that has a Default in the table.
func applyDefaults(c *Config) {
	v := reflect.ValueOf(c).Elem()
	for _, s := range settings {
		if f := v.FieldByName(s.Field); s.Default != nil && f.IsZero() {
			f.Set(reflect.ValueOf(s.Default))
		}
	}
}

// metaKey is the key of the group's meta item that records s, if one does.
func (s Setting) metaKey() (string, bool) { return strings.CutPrefix(s.GroupField, "meta.") }

// metaValue is the field of s in c as the meta item records it ("true", "16", "segment").
func (s Setting) metaValue(c Config) string {
	return fmt.Sprint(reflect.ValueOf(c).FieldByName(s.Field).Interface())
}
