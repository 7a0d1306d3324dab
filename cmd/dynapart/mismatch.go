package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dynapart/dynapart/lock"
)

// metaFlags names the `work` flag behind each setting a group records (worker's group meta).
var metaFlags = map[string]string{
	"n":                   "--workers",
	"meta.mode":           "--mode",
	"meta.sub_segments":   "--sub-segments",
	"meta.job":            "--job",
	"meta.ledger":         "--ledger",
	"meta.table":          "--table",
	"meta.complete_only":  "--complete-only",
	"meta.attr_prefix":    "--attr-prefix",
	"meta.ledger_table":   "--ledger-table",
	"meta.partition_attr": "--partition-attr",
	"meta.shards":         "--shards",
	"meta.index_name":     "--index-name",
	"meta.shard_attr":     "--shard-attr",
}

// groupMismatchError is a worker refused by its group: a usage error (exit 2, nothing written)
// whose message names the flag that differs.
type groupMismatchError struct {
	Flag string
	err  *lock.GroupMismatchError
}

func (e *groupMismatchError) Error() string {
	return fmt.Sprintf("%s %q differs from group %q, which was set up with %q: every worker of a group must "+
		"agree on it (use a new --group to change it)", e.Flag, e.err.Want, e.err.Group, e.err.Have)
}

func (e *groupMismatchError) Unwrap() error { return e.err }

// explainMismatch turns a *lock.GroupMismatchError into a groupMismatchError naming the flag;
// other errors are returned as they are.
func explainMismatch(err error) error {
	var gm *lock.GroupMismatchError
	if !errors.As(err, &gm) {
		return err
	}
	flag, ok := metaFlags[gm.Field]
	if !ok {
		flag = "--" + strings.ReplaceAll(strings.TrimPrefix(gm.Field, "meta."), "_", "-")
	}
	return &groupMismatchError{Flag: flag, err: gm}
}
