package worker

import (
	"strconv"

	"github.com/dynapart/dynapart/scan"
)

// groupMeta is what the group's meta item records (see lock.WithGroupMeta): every setting that
// decides where item state lives or which items a slot reads. A worker that disagrees with the
// group on one is refused with a *lock.GroupMismatchError whose Field is "meta." + the key:
//
//	mode, sub_segments, job, ledger, table   always
//	segments                                 segment and filter mode (the fixed segment count)
//	complete_only                            always ("true" / "false")
//	attr_prefix                              inline ledger
//	ledger_table                             table ledger
//	partition_attr                           filter mode
//	shards, index_name, shard_attr           index mode
//
// A key a mode or ledger does not use is not recorded. A group whose meta lacks a key (set up by
// an older version) is taken to have used that setting's default (groupMetaDefaults).
func groupMeta(c Config, segments int) map[string]string {
	meta := map[string]string{
		"mode":          string(c.Mode),
		"sub_segments":  strconv.Itoa(c.SubSegments),
		"job":           c.Job,
		"ledger":        string(c.Ledger),
		"table":         c.Table,
		"complete_only": strconv.FormatBool(c.CompleteOnly),
	}
	switch c.Ledger {
	case LedgerTable:
		meta["ledger_table"] = c.LedgerTable
	default:
		meta["attr_prefix"] = c.AttrPrefix
	}
	if c.Mode != scan.ModeIndex {
		meta["segments"] = strconv.Itoa(segments)
	}
	switch c.Mode {
	case scan.ModeFilter:
		meta["partition_attr"] = c.PartitionAttr
	case scan.ModeIndex:
		meta["shards"] = strconv.Itoa(c.Shards)
		meta["index_name"] = c.IndexName
		meta["shard_attr"] = c.ShardAttr
	}
	return meta
}

// groupMetaDefaults are the values of the keys added after the first release, for groups whose
// meta item lacks them (see lock.WithGroupMetaDefaults).
func groupMetaDefaults() map[string]string {
	d := (&Config{}).withDefaults()
	return map[string]string{
		"complete_only": "false",
		"attr_prefix":   d.AttrPrefix,
		"ledger_table":  d.LedgerTable,
		"index_name":    d.IndexName,
		"shard_attr":    d.ShardAttr,
	}
}
