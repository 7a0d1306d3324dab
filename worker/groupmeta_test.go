package worker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// runOnce runs a once-worker with c to its end.
func runOnce(t *testing.T, c Config) *Worker {
	t.Helper()
	w, err := New(c)
	require.NoError(t, err)
	require.NoError(t, w.Run(context.Background(), func(context.Context, Item) error { return nil }))
	return w
}

// requireRefused runs a worker with c and wants it refused with a *lock.GroupMismatchError naming
// field, before it took a slot or read an item.
func requireRefused(t *testing.T, c Config, field string) {
	t.Helper()
	w, err := New(c)
	require.NoError(t, err)
	err = w.Run(context.Background(), func(context.Context, Item) error { return nil })
	var gm *lock.GroupMismatchError
	require.ErrorAs(t, err, &gm)
	require.Equal(t, "meta."+field, gm.Field)
	require.Zero(t, w.Stats().Leases)
	require.Zero(t, w.Stats().Scanned)
}

// Every setting that decides where item state lives or which items a slot reads is on the group's
// meta: a worker of the group that disagrees on one is refused, naming it.
func TestGroupMetaRecordsWhereStateLives(t *testing.T) {
	cases := []struct {
		field  string
		base   func(f *fixture, c *Config)
		differ func(t *testing.T, f *fixture, c *Config)
	}{
		{"attr_prefix", nil, func(_ *testing.T, _ *fixture, c *Config) { c.AttrPrefix = "zz_" }},
		{"complete_only", nil, func(_ *testing.T, _ *fixture, c *Config) { c.CompleteOnly = true }},
		{"ledger_table", func(_ *fixture, c *Config) { c.Ledger = LedgerTable }, func(t *testing.T, f *fixture, c *Config) {
			c.LedgerTable = ddbtest.TableName(t, "ledger2")
			require.NoError(t, CreateLedgerTable(context.Background(), f.db, c.LedgerTable))
			ddbtest.DeleteOnCleanup(t, f.db, c.LedgerTable)
		}},
		{"index_name", func(f *fixture, c *Config) { c.Mode, c.Shards = scan.ModeIndex, 2 }, func(t *testing.T, f *fixture, c *Config) {
			require.NoError(t, scan.CreatePendingIndex(context.Background(), f.db, f.table, "other", "other_shard"))
			c.IndexName = "other"
		}},
		{"shard_attr", func(f *fixture, c *Config) { c.Mode, c.Shards = scan.ModeIndex, 2 }, func(_ *testing.T, _ *fixture, c *Config) {
			c.ShardAttr = "zz_shard"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			f := newFixture(t, 3)
			c := fastTimings(f.config(LedgerInline))
			c.Workers, c.Once = 1, true
			if tc.base != nil {
				tc.base(f, &c)
			}
			if c.Mode == scan.ModeIndex {
				require.NoError(t, scan.CreatePendingIndex(context.Background(), f.db, f.table, "dp_pending", "dp_shard"))
			}
			runOnce(t, c)
			tc.differ(t, f, &c)
			requireRefused(t, c, tc.field)
		})
	}
}

// A group set up before these settings were recorded (its meta item lacks their keys) is taken to
// have used the defaults: a worker with the defaults joins it, one with another value is refused.
func TestGroupMetaMissingKeyMeansDefault(t *testing.T) {
	f := newFixture(t, 3)
	ctx := context.Background()
	c := fastTimings(f.config(LedgerInline))
	c.Workers, c.Once = 1, true
	d := c.withDefaults()
	old, err := lock.New(f.db, f.leaseTable, lock.WithOwner("old-version"))
	require.NoError(t, err)
	l, err := old.AcquireSlot(ctx, d.Group, 1, lock.WithGroupMeta(map[string]string{
		"mode": string(d.Mode), "sub_segments": "4", "job": d.Job, "ledger": string(d.Ledger), "table": d.Table,
	}))
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	other := c
	other.AttrPrefix = "zz_"
	requireRefused(t, other, "attr_prefix")
	w := runOnce(t, c)
	require.EqualValues(t, 3, w.Stats().Completed)
}
