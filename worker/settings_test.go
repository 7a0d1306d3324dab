package worker

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// Every field of Config has one row in the table of settings, in Config's order, whose default is
// of the field's type; flags and group fields are unique.
func TestSettingsCoverConfig(t *testing.T) {
	notSettings := map[string]bool{"Client": true, "Logger": true, "Clock": true, "Hooks": true}
	ct := reflect.TypeFor[Config]()
	var fields []string
	for f := range ct.Fields() {
		if !notSettings[f.Name] {
			fields = append(fields, f.Name)
		}
	}
	var rows []string
	flags, groupFields := map[string]bool{}, map[string]bool{}
	for _, s := range Settings() {
		rows = append(rows, s.Field)
		f, ok := ct.FieldByName(s.Field)
		require.True(t, ok, "%s: no such Config field", s.Field)
		if s.Default != nil {
			require.Equal(t, f.Type, reflect.TypeOf(s.Default), "%s: default of another type", s.Field)
			require.False(t, reflect.ValueOf(s.Default).IsZero(), "%s: a zero default is no default", s.Field)
		}
		if s.Flag != "" {
			require.False(t, flags[s.Flag], "flag %s twice", s.Flag)
			require.NotEmpty(t, s.Help, "%s: a flag needs its help", s.Field)
			flags[s.Flag] = true
		}
		if s.GroupField != "" {
			require.False(t, groupFields[s.GroupField], "group field %s twice", s.GroupField)
			groupFields[s.GroupField] = true
			_, isMeta := s.metaKey()
			require.True(t, isMeta || s.GroupField == "n", "%s: group field %q is neither n nor meta.<key>", s.Field, s.GroupField)
		}
		require.False(t, s.AddedLater && s.GroupField == "", "%s: AddedLater is for meta keys", s.Field)
	}
	require.Equal(t, fields, rows)
}

// The table's defaults are the Config defaults, and the computed ones follow from them.
func TestConfigDefaults(t *testing.T) {
	d := (&Config{Table: "t"}).withDefaults()
	require.Equal(t, "dynapart-leases", d.LeaseTable)
	require.Equal(t, "t/default", d.Group)
	require.Equal(t, scan.ModeSegment, d.Mode)
	require.Equal(t, 4, d.SubSegments)
	require.Equal(t, "dp_pending", d.IndexName)
	require.Equal(t, "dp_shard", d.ShardAttr)
	require.Equal(t, 16, d.Shards)
	require.Equal(t, int32(1000), d.PageSize)
	require.Equal(t, 16, d.Concurrency)
	require.Equal(t, 10*time.Second, d.LeaseTTL)
	require.Equal(t, 10*time.Second/3, d.Heartbeat)
	require.Equal(t, time.Second, d.MaxClockSkew)
	require.Equal(t, time.Second, d.StandbyPoll)
	require.Equal(t, time.Minute, d.ClaimTTL)
	require.Equal(t, 5, d.MaxAttempts)
	require.Equal(t, time.Second, d.RetryBackoff)
	require.Equal(t, 5*time.Minute, d.MaxRetryBackoff)
	require.Equal(t, 30*time.Second, d.PollInterval)
	require.Equal(t, time.Second, d.CheckpointInterval)
	require.Equal(t, 15*time.Minute, d.OutageTimeout)
	require.Equal(t, 10*time.Second, d.DrainTimeout)
	require.Equal(t, 5*time.Second, d.HandlerGrace)
	require.Equal(t, 2*time.Second, d.DeadlineMargin)
	require.Equal(t, 30*time.Second, d.WriteTimeout)
	require.Equal(t, 10*time.Second, d.LeaseWriteTimeout)
	require.Equal(t, "default", d.Job)
	require.Equal(t, LedgerInline, d.Ledger)
	require.Equal(t, "dynapart-ledger", d.LedgerTable)
	require.Equal(t, "dp_", d.AttrPrefix)
	require.NotEmpty(t, d.Owner)
	require.NotNil(t, d.Logger)
	require.Equal(t, lock.SystemClock{}, d.Clock)

	once := (&Config{Table: "t", Once: true, ReadRate: 10, LeaseTTL: 3 * time.Second, Job: "j"}).withDefaults()
	require.Equal(t, 5*time.Second, once.PollInterval)
	require.Zero(t, once.PageSize, "with ReadRate, scan sizes the pages")
	require.Equal(t, time.Second, once.Heartbeat)
	require.Equal(t, "t/j", once.Group)
}

// The group's meta records each group setting where it applies, as it always has.
func TestGroupMetaKeys(t *testing.T) {
	base := (&Config{Table: "t"}).withDefaults()
	require.Equal(t, map[string]string{"mode": "segment", "sub_segments": "4", "job": "default", "ledger": "inline",
		"table": "t", "complete_only": "false", "once": "false", "attr_prefix": "dp_", "segments": "64", "versions": "false"}, groupMeta(base, 64))

	filter := base
	filter.Mode, filter.Ledger, filter.LedgerTable, filter.PartitionAttr, filter.CompleteOnly, filter.Once = scan.ModeFilter, LedgerTable, "led", "pk", true, true
	require.Equal(t, map[string]string{"mode": "filter", "sub_segments": "4", "job": "default", "ledger": "table",
		"table": "t", "complete_only": "true", "once": "true", "ledger_table": "led", "segments": "8", "partition_attr": "pk", "versions": "false"}, groupMeta(filter, 8))

	index := base
	index.Mode, index.Shards, index.Segments = scan.ModeIndex, 3, 99
	require.Equal(t, map[string]string{"mode": "index", "sub_segments": "4", "job": "default", "ledger": "inline",
		"table": "t", "complete_only": "false", "once": "false", "attr_prefix": "dp_", "shards": "3", "index_name": "dp_pending",
		"shard_attr": "dp_shard", "versions": "false"}, groupMeta(index, 0))

	require.Equal(t, map[string]string{"complete_only": "false", "once": lock.AnyValue, "attr_prefix": "dp_", "ledger_table": "dynapart-ledger",
		"index_name": "dp_pending", "shard_attr": "dp_shard", "versions": "false"}, groupMetaDefaults())
}

// The Groups section of the package doc lists the group settings of the table as they are.
func TestGroupsDocListsTheSettings(t *testing.T) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, s := range Settings() {
		if s.GroupField != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Field, s.GroupField, s.Scope)
		}
	}
	require.NoError(t, tw.Flush())
	want := "//\t" + strings.ReplaceAll(strings.TrimSuffix(b.String(), "\n"), "\n", "\n//\t") + "\n"
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	require.Contains(t, string(doc), want, "doc.go's Groups list is out of date; it should read:\n%s", want)
}
