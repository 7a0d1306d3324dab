package lock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// WithGroupMetaDefaults gives the value a meta key has when a meta item (or the caller's meta)
// lacks it: a group set up before a setting was recorded is taken to have used its default, so
// its workers keep running, while a worker that sets the key to anything else is refused with a
// *GroupMismatchError. A default of AnyValue accepts every value from a group that lacks the key.
// Keys without a default compare as "" when missing.
func WithGroupMetaDefaults(defaults map[string]string) AcquireOption {
	return func(o *acquireOpts) { o.metaDefaults = defaults }
}

// AnyValue, as a meta key's default (WithGroupMetaDefaults), lets a group whose meta item lacks
// the key (set up before the key was recorded) take workers of any value for it.
const AnyValue = "\x00any"

// checkMeta compares the group's recorded n (unless the caller joins at the current n) and meta
// with the caller's. Meta is compared only when
// the caller gave WithGroupMeta. Keys both sides record are compared first, so that the error
// names the setting that differs rather than a key one side records only because of it (a key
// that only one ledger kind or mode records).
func checkMeta(t target, have metaItem) error {
	if !t.join && have.n != t.n { // a join takes the group's n, whatever it is
		return &GroupMismatchError{Group: t.name, Field: "n", Have: strconv.Itoa(have.n), Want: strconv.Itoa(t.n)}
	}
	if t.meta == nil {
		return nil
	}
	value := func(m map[string]string, k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return t.defs[k]
	}
	keys := maps.Clone(have.meta)
	maps.Copy(keys, t.meta)
	sorted := slices.Sorted(maps.Keys(keys))
	for _, shared := range []bool{true, false} {
		for _, k := range sorted {
			_, inHave := have.meta[k]
			_, inWant := t.meta[k]
			if (inHave && inWant) != shared || !inHave && t.defs[k] == AnyValue {
				continue
			}
			if h, w := value(have.meta, k), value(t.meta, k); h != w {
				return &GroupMismatchError{Group: t.name, Field: "meta." + k, Have: h, Want: w}
			}
		}
	}
	return nil
}

// recordMeta creates the group's meta item, or, when another contender created it first, checks
// that it agrees with ours. It returns the meta item as it wrote or found it: a read of the group
// made after the take that preceded it (see Lease.GroupAfterTake).
func (c *Client) recordMeta(ctx context.Context, t target) (metaItem, error) {
	item := encodeMeta(t.pk, t.n, t.meta)
	err := c.putNew(ctx, item)
	if err == nil {
		c.noteSize(t.pk, metaItem{exists: true, n: t.n})
		return decodeMeta(item), nil
	}
	cf, ok := conditionFailed(err)
	if !ok {
		return metaItem{}, fmt.Errorf("lock: record group %q: %w", t.name, c.tableErr(err))
	}
	have := decodeMeta(cf.Item)
	if !have.exists {
		if have, err = c.readMeta(ctx, t.pk); err != nil {
			return metaItem{}, err
		}
	}
	return have, checkMeta(t, have)
}

// CheckMeta compares meta, the settings a worker of group would record (defaults as
// WithGroupMetaDefaults gives them), with the group's as read in st, as an acquisition does, and
// writes nothing: a *GroupMismatchError names the first setting that differs. A group that does
// not exist takes any settings. A dry run uses it to refuse what the run would be refused.
func (st GroupState) CheckMeta(group string, meta, defaults map[string]string) error {
	if !st.Exists {
		return nil
	}
	return checkMeta(target{name: group, meta: meta, defs: defaults, join: true}, metaItem{exists: true, n: st.N, meta: st.Meta})
}
