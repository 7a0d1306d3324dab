package worker

import (
	"errors"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// FuzzDecodeSlotCheckpoint: a slot checkpoint read from the lease table may be anything (an older
// version, a hand edit, a truncated write). Decoding never panics, rejects what it cannot read, and
// whatever it accepts encodes back to the same checkpoint.
func FuzzDecodeSlotCheckpoint(f *testing.F) {
	f.Add("")
	f.Add(slotCheckpoint{pass: 3, dirty: true, scan: `{"v":1,"t":"x","n":1,"c":[{"s":0,"d":true}]}`}.encode())
	f.Add(slotCheckpoint{pass: 0, scan: ""}.encode())
	f.Add("dp1|0|0|")
	f.Add("dp1|-1|0|x")
	f.Add("dp1|1|2|x")
	f.Add("dp1|99999999999999999999|1|x")
	f.Add("dp1|+7|1|a|b|c")
	f.Add("dp2|1|1|x")
	f.Add(slotCheckpoint{pass: 2, counts: slotCounts{done: 5, failed: 1, scanned: 9, elapsed: 1500 * time.Millisecond}, scan: "a|b"}.encode())
	f.Add("dp2|1|0|1.2.3|x")
	f.Add("dp2|1|0|1.2.3.99999999999999999|x")
	f.Add("dp1|1")
	f.Add(slotCheckpoint{epoch: 3, n: 5, pass: 1, scan: "x"}.encode())
	f.Add("dp3|-2.1|1|0|0.0.0.0|x")
	f.Add("dp3|2|1|0|0.0.0.0|x")
	f.Add("dp3|99999999999999999999.3|1|0|0.0.0.0|x")
	f.Add(slotCheckpoint{epoch: 3, n: 5, run: 17, pass: 1, scan: "x"}.encode())
	f.Add("dp3|1.2.0|1|0|0.0.0.0|x")
	f.Add("dp3|1.2.3.4|1|0|0.0.0.0|x")
	f.Add("\xff\x00|\n")
	f.Fuzz(func(t *testing.T, v string) {
		cp, err := decodeSlotCheckpoint(v)
		if err != nil {
			if cp != (slotCheckpoint{}) {
				t.Fatalf("decode %q failed (%v) but returned %+v", v, err, cp)
			}
			return
		}
		if cp.pass < 0 {
			t.Fatalf("decode %q: negative pass %d", v, cp.pass)
		}
		if v == "" {
			if cp != (slotCheckpoint{}) {
				t.Fatalf("empty checkpoint decoded to %+v", cp)
			}
			return
		}
		enc := cp.encode()
		back, err := decodeSlotCheckpoint(enc)
		if err != nil {
			t.Fatalf("re-decode %q (from %q): %v", enc, v, err)
		}
		if back != cp {
			t.Fatalf("round trip %q: %+v != %+v", v, back, cp)
		}
		if !strings.HasPrefix(enc, checkpointPrefix+"|") || !strings.HasSuffix(enc, cp.scan) {
			t.Fatalf("encode %+v = %q", cp, enc)
		}
	})
}

// noCalls is a client for New's checks: they must not call DynamoDB, so any call panics (a nil
// embedded interface) and fails the fuzz target.
type noCalls struct{ DynamoDBClient }

// configInput is a fuzzed Config: every number New checks, and the names it compares. Durations
// are nanoseconds; Flags holds ConsistentRead, BatchClaims, CompleteOnly and Once (bits 0 to 3).
// The names are fuzzed as indices into fuzzModes, fuzzLedgers and fuzzTables: New only compares
// them whole, and the fuzzer's minimization of free strings takes most of a short run.
type configInput struct {
	Workers, SubSegments, Shards, Concurrency, MaxAttempts int
	PageSize                                               int32
	ReadRate                                               float64
	LeaseTTL, Heartbeat, MaxClockSkew, StandbyPoll, ClaimTTL, RetryBackoff, MaxRetryBackoff,
	PollInterval, CheckpointInterval, DrainTimeout, DeadlineMargin int64
	Mode, Ledger, Table, LeaseTable, LedgerTable string
	Flags                                        uint8
}

var (
	fuzzModes   = []string{"", "segment", "filter", "index", "Segment", "ïndex\x00", "sideways"}
	fuzzLedgers = []string{"", "inline", "table", "Table", "paper"}
	fuzzTables  = []string{"", "users", DefaultLeaseTable, DefaultLedgerTable, "é/\x00"}
)

func pick(names []string, i uint8) string { return names[int(i)%len(names)] }

func (in configInput) add(f *testing.F) {
	index := func(names []string, s string) uint8 {
		i := slices.Index(names, s)
		if i < 0 {
			f.Fatalf("seed name %q is not in %q", s, names)
		}
		return uint8(i)
	}
	f.Add(in.Workers, in.SubSegments, in.Shards, in.Concurrency, in.MaxAttempts, in.PageSize, in.ReadRate,
		in.LeaseTTL, in.Heartbeat, in.MaxClockSkew, in.StandbyPoll, in.ClaimTTL, in.RetryBackoff, in.MaxRetryBackoff,
		in.PollInterval, in.CheckpointInterval, in.DrainTimeout, in.DeadlineMargin,
		index(fuzzModes, in.Mode), index(fuzzLedgers, in.Ledger), index(fuzzTables, in.Table),
		index(fuzzTables, in.LeaseTable), index(fuzzTables, in.LedgerTable), in.Flags)
}

func (in configInput) config() Config {
	return Config{
		Client: noCalls{}, Table: in.Table, LeaseTable: in.LeaseTable, Workers: in.Workers,
		Mode: scan.Mode(in.Mode), SubSegments: in.SubSegments, Shards: in.Shards,
		ConsistentRead: in.Flags&1 != 0, ReadRate: in.ReadRate, PageSize: in.PageSize,
		Concurrency: in.Concurrency, BatchClaims: in.Flags&2 != 0, CompleteOnly: in.Flags&4 != 0,
		LeaseTTL: time.Duration(in.LeaseTTL), Heartbeat: time.Duration(in.Heartbeat),
		MaxClockSkew: time.Duration(in.MaxClockSkew), StandbyPoll: time.Duration(in.StandbyPoll),
		ClaimTTL: time.Duration(in.ClaimTTL), MaxAttempts: in.MaxAttempts,
		RetryBackoff: time.Duration(in.RetryBackoff), MaxRetryBackoff: time.Duration(in.MaxRetryBackoff),
		Once: in.Flags&8 != 0, PollInterval: time.Duration(in.PollInterval),
		CheckpointInterval: time.Duration(in.CheckpointInterval), DrainTimeout: time.Duration(in.DrainTimeout),
		DeadlineMargin: time.Duration(in.DeadlineMargin), Ledger: LedgerKind(in.Ledger), LedgerTable: in.LedgerTable,
	}
}

// documentedDefaults fills the zero fields with the defaults the Config comments name.
func documentedDefaults(c Config) Config {
	orDefault := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.LeaseTable == "" {
		c.LeaseTable = "dynapart-leases"
	}
	if c.Mode == "" {
		c.Mode = scan.ModeSegment
	}
	if c.SubSegments == 0 {
		c.SubSegments = 4
	}
	if c.Shards == 0 {
		c.Shards = 16
	}
	if c.PageSize == 0 && c.ReadRate == 0 {
		c.PageSize = 1000
	}
	if c.Concurrency == 0 {
		c.Concurrency = 16
	}
	orDefault(&c.LeaseTTL, 10*time.Second)
	orDefault(&c.Heartbeat, c.LeaseTTL/3)
	orDefault(&c.MaxClockSkew, time.Second)
	orDefault(&c.StandbyPoll, time.Second)
	orDefault(&c.ClaimTTL, time.Minute)
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	orDefault(&c.RetryBackoff, time.Second)
	orDefault(&c.MaxRetryBackoff, 5*time.Minute)
	if c.Once {
		orDefault(&c.PollInterval, 5*time.Second)
	}
	orDefault(&c.PollInterval, 30*time.Second)
	orDefault(&c.CheckpointInterval, time.Second)
	orDefault(&c.OutageTimeout, 15*time.Minute)
	orDefault(&c.DrainTimeout, 10*time.Second)
	orDefault(&c.HandlerGrace, 5*time.Second)
	orDefault(&c.DeadlineMargin, 2*time.Second)
	orDefault(&c.WriteTimeout, 30*time.Second)
	orDefault(&c.LeaseWriteTimeout, 10*time.Second)
	orDefault(&c.BudgetInterval, 5*time.Second)
	orDefault(&c.StreamPoll, time.Second)
	if c.Ledger == "" {
		c.Ledger = LedgerInline
	}
	if c.LedgerTable == "" {
		c.LedgerTable = "dynapart-ledger"
	}
	return c
}

// exact is the product of xs without overflow.
func exact[T ~int | ~int64](xs ...T) *big.Int {
	p := big.NewInt(1)
	for _, x := range xs {
		p.Mul(p, big.NewInt(int64(x)))
	}
	return p
}

// violations lists, for every rule that c (with defaults) breaks, the fields a rejection may name.
// The rules are the Config comments' and what lock.New and scan.New require when Run builds them.
// Durations are compared without overflow.
func violations(c Config, in configInput) [][]string {
	var out [][]string
	broken := func(cond bool, fields ...string) {
		if cond {
			out = append(out, fields)
		}
	}
	heartbeat := []string{"Heartbeat"}
	if in.Heartbeat == 0 {
		heartbeat = []string{"Heartbeat", "LeaseTTL"} // Heartbeat is LeaseTTL / 3
	}
	broken(c.Table == "", "Table")
	broken(c.Workers < 0, "Workers") // 0 joins the group at its n
	broken(!(c.ReadRate >= 0) || math.IsInf(c.ReadRate, 1), "ReadRate")
	broken(c.PageSize < 0, "PageSize")
	broken(c.SubSegments < 1 || c.SubSegments > maxSegments, "SubSegments")
	broken(c.Concurrency < 1 || c.Concurrency > 100_000, "Concurrency")
	broken(c.LeaseTTL <= 0, "LeaseTTL")
	broken(c.Heartbeat <= 0, heartbeat...)
	broken(exact(c.LeaseTTL).Cmp(exact(c.Heartbeat, 2)) <= 0, append(heartbeat, "LeaseTTL")...)
	broken(c.MaxClockSkew < 0, "MaxClockSkew")
	// The lease's safety margin, max(Heartbeat/2, MaxClockSkew), plus a heartbeat must fit in
	// the TTL (lock.New).
	broken(new(big.Int).Add(exact(max(c.Heartbeat/2, c.MaxClockSkew)), exact(c.Heartbeat)).Cmp(exact(c.LeaseTTL)) >= 0,
		append(heartbeat, "LeaseTTL", "MaxClockSkew")...)
	broken(c.StandbyPoll <= 0, "StandbyPoll")
	broken(c.ClaimTTL < time.Second, "ClaimTTL")
	broken(c.MaxAttempts < 1, "MaxAttempts")
	broken(c.RetryBackoff < 0 || c.MaxRetryBackoff < c.RetryBackoff, "RetryBackoff", "MaxRetryBackoff")
	broken(c.Ledger != LedgerInline && c.Ledger != LedgerTable, "Ledger")
	broken(c.Ledger == LedgerTable && c.LedgerTable == c.Table, "LedgerTable", "Table")
	broken(c.LeaseTable == c.Table, "LeaseTable", "Table")
	broken(c.CompleteOnly && c.BatchClaims, "BatchClaims", "CompleteOnly")
	broken(c.DrainTimeout < 0, "DrainTimeout")
	broken(c.DeadlineMargin < 0, "DeadlineMargin")
	broken(c.PollInterval < 0, "PollInterval")
	broken(c.CheckpointInterval < 0, "CheckpointInterval")
	_, err := scan.ParseMode(string(c.Mode))
	broken(err != nil, "Mode")
	if c.Mode == scan.ModeIndex {
		broken(c.Shards < c.Workers, "Shards", "Workers")
		broken(c.Shards > maxSegments, "Shards")
		broken(c.ConsistentRead, "ConsistentRead", "Mode")
	} else if c.Workers >= 1 && c.SubSegments >= 1 {
		broken(exact(c.Workers, c.SubSegments).Cmp(exact(maxSegments)) > 0, "Workers", "SubSegments")
	}
	return out
}

// FuzzConfig: New never panics and never calls DynamoDB; it rejects a Config with a *ConfigError
// that names a field the documentation's rules blame, and accepts one only when every rule holds.
// An accepted Config has its documented defaults, and the lock and scan configurations Run builds
// from it are valid too, so a Config that New accepts does not fail later, after a lease is taken.
func FuzzConfig(f *testing.F) {
	valid := configInput{Workers: 3, Table: "users"}
	valid.add(f)
	for _, edit := range []func(*configInput){
		func(in *configInput) { in.Table = "" },
		func(in *configInput) { in.Workers = 0 },
		func(in *configInput) { in.Workers = -1 },
		func(in *configInput) { in.Workers = math.MaxInt },
		func(in *configInput) { in.Workers, in.SubSegments = 250_000, 4 },
		func(in *configInput) { in.Workers, in.SubSegments = 250_001, 4 },
		func(in *configInput) { in.SubSegments = -4 },
		func(in *configInput) { in.Mode, in.Workers, in.SubSegments = "index", 1, math.MaxInt/2+1 },
		func(in *configInput) { in.Mode, in.Workers, in.Shards = "index", 17, 0 },
		func(in *configInput) { in.Mode, in.Workers, in.Shards = "index", 1000, 1_000_000 },
		func(in *configInput) { in.Mode, in.Workers, in.Shards = "index", 1000, 1_000_001 },
		func(in *configInput) { in.Mode, in.Flags = "index", 1 },
		func(in *configInput) { in.Mode = "filter" },
		func(in *configInput) { in.Mode = "Segment" },
		func(in *configInput) { in.Mode = "ïndex\x00" },
		func(in *configInput) { in.Mode = "sideways" },
		func(in *configInput) { in.ReadRate = -0.5 },
		func(in *configInput) { in.ReadRate = math.Copysign(0, -1) },
		func(in *configInput) { in.ReadRate = math.NaN() },
		func(in *configInput) { in.ReadRate = math.Inf(1) },
		func(in *configInput) { in.ReadRate = math.MaxFloat64 },
		func(in *configInput) { in.ReadRate = 5e-324 },
		func(in *configInput) { in.PageSize = -1 },
		func(in *configInput) { in.PageSize = math.MaxInt32 },
		func(in *configInput) { in.Concurrency = -16 },
		func(in *configInput) { in.MaxAttempts = -1 },
		func(in *configInput) { in.LeaseTTL = -int64(time.Second) },
		func(in *configInput) { in.LeaseTTL = 2 },
		func(in *configInput) { in.LeaseTTL = 3 },
		func(in *configInput) { in.LeaseTTL, in.Heartbeat = int64(time.Second), -int64(time.Hour) },
		func(in *configInput) { in.LeaseTTL, in.Heartbeat = -int64(time.Second), -int64(time.Hour) },
		func(in *configInput) { in.LeaseTTL, in.Heartbeat = int64(10*time.Second), int64(5*time.Second) },
		func(in *configInput) { in.LeaseTTL, in.Heartbeat = math.MaxInt64, math.MaxInt64/2+1 },
		func(in *configInput) { in.LeaseTTL, in.Heartbeat = math.MaxInt64, math.MaxInt64/4 },
		func(in *configInput) { in.MaxClockSkew = -1 },
		func(in *configInput) { in.MaxClockSkew = int64(7 * time.Second) },
		func(in *configInput) { in.MaxClockSkew = math.MaxInt64 },
		func(in *configInput) { in.StandbyPoll = -int64(time.Second) },
		func(in *configInput) { in.ClaimTTL = int64(time.Second) - 1 },
		func(in *configInput) { in.ClaimTTL = math.MaxInt64 },
		func(in *configInput) { in.RetryBackoff = -1 },
		func(in *configInput) { in.RetryBackoff, in.MaxRetryBackoff = int64(time.Hour), int64(time.Minute) },
		func(in *configInput) { in.MaxRetryBackoff = -1 },
		func(in *configInput) { in.PollInterval = -1 },
		func(in *configInput) { in.CheckpointInterval = -1 },
		func(in *configInput) { in.DrainTimeout = -1 },
		func(in *configInput) { in.DeadlineMargin = -1 },
		func(in *configInput) { in.DeadlineMargin = math.MaxInt64 },
		func(in *configInput) { in.Ledger = "table" },
		func(in *configInput) { in.Ledger, in.LedgerTable = "table", "users" },
		func(in *configInput) { in.Ledger, in.LedgerTable = "inline", "users" },
		func(in *configInput) { in.Ledger = "paper" },
		func(in *configInput) { in.Ledger = "Table" },
		func(in *configInput) { in.Table = "é/\x00" },
		func(in *configInput) { in.LeaseTable = "users" },
		func(in *configInput) { in.Table = "dynapart-leases" },
		func(in *configInput) { in.Flags = 2 | 4 },
		func(in *configInput) { in.Flags = 8 },
	} {
		in := valid
		edit(&in)
		in.add(f)
	}
	f.Fuzz(func(t *testing.T, workers, subSegments, shards, concurrency, maxAttempts int, pageSize int32, readRate float64,
		leaseTTL, heartbeat, maxClockSkew, standbyPoll, claimTTL, retryBackoff, maxRetryBackoff,
		pollInterval, checkpointInterval, drainTimeout, deadlineMargin int64,
		mode, ledger, table, leaseTable, ledgerTable, flags uint8) {
		in := configInput{workers, subSegments, shards, concurrency, maxAttempts, pageSize, readRate,
			leaseTTL, heartbeat, maxClockSkew, standbyPoll, claimTTL, retryBackoff, maxRetryBackoff,
			pollInterval, checkpointInterval, drainTimeout, deadlineMargin,
			pick(fuzzModes, mode), pick(fuzzLedgers, ledger), pick(fuzzTables, table),
			pick(fuzzTables, leaseTable), pick(fuzzTables, ledgerTable), flags}
		want := documentedDefaults(in.config())
		broken := violations(want, in)
		w, err := New(in.config())
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("New(%+v): %v (%T) is not a *ConfigError", in, err, err)
			}
			if _, ok := reflect.TypeFor[Config]().FieldByName(ce.Field); !ok || !strings.Contains(err.Error(), ce.Field) {
				t.Fatalf("New(%+v): %q names no Config field", in, err)
			}
			if w != nil {
				t.Fatalf("New(%+v) returned a Worker with %v", in, err)
			}
			for _, fields := range broken {
				if slices.Contains(fields, ce.Field) {
					return
				}
			}
			t.Fatalf("New(%+v): %v blames %s, but the broken rules blame %v", in, err, ce.Field, broken)
		}
		if len(broken) > 0 {
			t.Fatalf("New(%+v) accepted a config that breaks rules naming %v", in, broken)
		}
		got := w.Config()
		if got.Owner == "" || got.Logger == nil || got.Clock == nil || got.Job != "default" || got.Group != in.Table+"/default" ||
			got.IndexName != "dp_pending" || got.ShardAttr != "dp_shard" || got.AttrPrefix != "dp_" {
			t.Fatalf("New(%+v): defaults not filled: %+v", in, got)
		}
		got.Client, got.Owner, got.Logger, got.Clock, got.Job, got.Group = want.Client, "", nil, nil, "", ""
		got.IndexName, got.ShardAttr, got.AttrPrefix = "", "", ""
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("New(%+v): config\n%+v\nwant the documented defaults\n%+v", in, got, want)
		}
		checkRunConfigs(t, w.Config())
	})
}

// checkRunConfigs builds the lock client and the scanner of the last slot the way Run does, and
// fails when either rejects what New accepted.
func checkRunConfigs(t *testing.T, c Config) {
	t.Helper()
	if _, err := lock.New(c.Client, c.LeaseTable,
		lock.WithOwner(c.Owner), lock.WithLeaseTTL(c.LeaseTTL), lock.WithHeartbeat(c.Heartbeat),
		lock.WithMaxClockSkew(c.MaxClockSkew), lock.WithPollInterval(c.StandbyPoll),
		lock.WithClock(c.Clock), lock.WithLogger(c.Logger)); err != nil {
		t.Fatalf("New accepted %+v, but the lock client rejects it: %v", c, err)
	}
	n := max(c.Workers, 1) // Workers 0 joins a group at its n, checked then
	plan := scan.Plan{Mode: c.Mode, Slots: n, SubSegments: c.SubSegments}
	if c.Mode != scan.ModeIndex {
		plan.Total = scan.DefaultTotal(n, c.SubSegments) // a new group's segment count
	}
	if err := plan.Validate(); err != nil {
		t.Fatalf("New accepted %+v, but the scan plan is invalid: %v", c, err)
	}
	// scan.New allocates one stream per segment (shard) of the slot: try it where that is cheap.
	streams := plan.TotalSegments()/n + 1
	switch c.Mode {
	case scan.ModeFilter:
		streams = plan.TotalSegments()
	case scan.ModeIndex:
		streams = c.Shards / n
	}
	if streams > 4096 {
		return
	}
	if _, err := scan.New(scan.Config{
		Client: c.Client, Table: c.Table, Slot: n - 1, Plan: plan,
		PartitionAttr: c.PartitionAttr, IndexName: c.IndexName, ShardAttr: c.ShardAttr, Shards: c.Shards,
		ConsistentRead: c.ConsistentRead, ReadRate: c.ReadRate, PageLimit: c.PageSize,
	}); err != nil {
		t.Fatalf("New accepted %+v, but the scanner rejects it: %v", c, err)
	}
}

// TestBackoffNeverOverflows: a limit near the largest duration and many attempts give the limit
// (±20% jitter), never zero or a negative pause.
func TestBackoffNeverOverflows(t *testing.T) {
	for _, limit := range []time.Duration{time.Second, math.MaxInt64 / 2, math.MaxInt64} {
		for _, attempt := range []int{1, 2, 40, 70, 1000} {
			want := limit
			if attempt-1 < 33 { // 1s << 33 still fits in a Duration
				if e := time.Second << (attempt - 1); e < limit {
					want = e
				}
			}
			d := backoff(time.Second, limit, attempt)
			if float64(d) < 0.79*float64(want) || float64(d) > 1.21*float64(want) {
				t.Fatalf("backoff(1s, %s, %d) = %s, want %s ±20%%", limit, attempt, d, want)
			}
		}
	}
}
