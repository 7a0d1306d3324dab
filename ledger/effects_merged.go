package ledger

import (
	"maps"
	"strings"
	"sync"
)

// mergedUpdate is a transition's update merged with an item's changes: the update expression and
// the names of both, which requests share and nothing writes.
type mergedUpdate struct {
	expr  string
	names map[string]string
}

// mergedUpdates holds, per transition and shape of changes (renderChangesOnce), their merged
// update, built once: a transform job's items all have one shape, so its completions build no
// expression. At most maxShapes per ledger are kept.
type mergedUpdates struct {
	mu sync.RWMutex // read on every completion with changes, written once per shape
	m  map[mergedKey]mergedUpdate
}

type mergedKey struct {
	c     *compiled
	shape *renderedShape
}

// of is c's update merged with item's clauses.
func (u *mergedUpdates) of(c *compiled, item *clauses) mergedUpdate {
	if item.shape == nil {
		return mergeUpdate(c, item)
	}
	k := mergedKey{c, item.shape}
	u.mu.RLock()
	m, ok := u.m[k]
	u.mu.RUnlock()
	if ok {
		return m
	}
	m = mergeUpdate(c, item)
	u.mu.Lock()
	if u.m == nil {
		u.m = map[mergedKey]mergedUpdate{}
	}
	if len(u.m) < maxShapes {
		u.m[k] = m
	}
	u.mu.Unlock()
	return m
}

// mergeUpdate renders c's update merged with item's clauses.
func mergeUpdate(c *compiled, item *clauses) mergedUpdate {
	var b strings.Builder
	item.renderInto(&b, &c.upd)
	names := make(map[string]string, len(c.names)+len(item.names))
	maps.Copy(names, c.names)
	maps.Copy(names, item.names)
	return mergedUpdate{expr: b.String(), names: names}
}
