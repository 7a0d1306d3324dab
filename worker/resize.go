package worker

import (
	"context"
	"fmt"
	"strconv"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// Resize changes a group's slot count to m, running or idle: the worker-level form of
// lock.Client.ResizeGroup. It first checks m against the group's scan units (a segment-mode group
// can have at most as many slots as segments, an index-mode group as shards; those counts are
// fixed when the group is created): a violation is a *ConfigError on "Workers" and nothing is
// written; a group without a meta item is an error wrapping lock.ErrGroupNotFound. A group
// recorded before segment counts were gets its count (n x sub_segments) recorded in the resize's
// own write, as it can no longer be derived once n changes.
//
// Within one heartbeat every holder stops claiming, saves its checkpoint, releases its slot and
// takes a slot again under the new plan, which starts only once no slot is held under the old
// one (see the package documentation, "Elastic groups").
func Resize(ctx context.Context, locks *lock.Client, group string, m int) (lock.Resize, error) {
	if m < 1 {
		return lock.Resize{}, &ConfigError{Pkg: "dynapart", Field: "Workers", Reason: fmt.Sprintf("a group needs at least 1 slot, got %d", m)}
	}
	st, err := locks.GroupState(ctx, group)
	if err != nil {
		return lock.Resize{}, err
	}
	if !st.Exists {
		return lock.Resize{}, fmt.Errorf("dynapart: group %q in %q: %w", group, locks.Table(), lock.ErrGroupNotFound)
	}
	if limit, unit := GroupUnits(st); limit > 0 && m > limit && scan.Mode(st.Meta["mode"]) != scan.ModeFilter {
		return lock.Resize{}, &ConfigError{Pkg: "dynapart", Field: "Workers", Reason: fmt.Sprintf(
			"group %q can be scaled up to %d slots, not %d: it has %d %s, and that count is fixed when the group is created", group, limit, m, limit, unit)}
	}
	return locks.ResizeGroup(ctx, group, m, lock.WithResizeMeta(pinSegments))
}

// GroupUnits is the number of scan units of a group as its meta item records them, and their
// name: in index mode the shards, otherwise the parallel-scan segments ("segments", or for a group
// recorded before segment counts were, n x sub_segments). 0 when the meta item does not say.
func GroupUnits(st lock.GroupState) (count int, unit string) {
	atoi := func(k string) int { v, _ := strconv.Atoi(st.Meta[k]); return v }
	if scan.Mode(st.Meta["mode"]) == scan.ModeIndex {
		return atoi("shards"), "shards"
	}
	if v := atoi("segments"); v > 0 {
		return v, "segments"
	}
	sub := atoi("sub_segments")
	if sub < 1 {
		sub = scan.DefaultSubSegments
	}
	return st.N * sub, "segments"
}

// pinSegments records the segment count of a group made before it was recorded.
func pinSegments(st lock.GroupState) map[string]string {
	if scan.Mode(st.Meta["mode"]) == scan.ModeIndex || st.Meta["segments"] != "" || st.Meta["mode"] == "" {
		return nil
	}
	n, _ := GroupUnits(st)
	return map[string]string{"segments": strconv.Itoa(n)}
}
