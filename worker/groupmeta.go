package worker

import "github.com/dynapart/dynapart/lock"

// groupMeta is what the group's meta item records (see lock.WithGroupMeta): every setting of the
// table (Settings) with a "meta.<key>" GroupField, where its Scope covers c, segments as the
// group's segment count. These decide where item state lives or which items a slot reads; a worker
// that disagrees with the group on one is refused with a *lock.GroupMismatchError whose Field is
// the setting's GroupField. A group whose meta lacks a key (set up by an older version) is taken
// to have used that setting's default (groupMetaDefaults).
func groupMeta(c Config, segments int) map[string]string {
	c.Segments = segments
	meta := map[string]string{}
	for _, s := range settings {
		if key, ok := s.metaKey(); ok && s.Scope.Covers(c) {
			meta[key] = s.metaValue(c)
		}
	}
	return meta
}

// groupMetaDefaults are the values of the keys added after the first release (AddedLater), for
// groups whose meta item lacks them (see lock.WithGroupMetaDefaults).
func groupMetaDefaults() map[string]string {
	d := (&Config{}).withDefaults()
	defaults := map[string]string{}
	for _, s := range settings {
		key, ok := s.metaKey()
		switch {
		case ok && s.AnyIfMissing:
			defaults[key] = lock.AnyValue
		case ok && s.AddedLater:
			defaults[key] = s.metaValue(d)
		}
	}
	return defaults
}
