package cli

import "github.com/dynapart/dynapart/lock"

// GroupFinished reports a group whose slots 0..N-1 are all finished under its current plan
// (slots beyond N, left by a scale-down, do not count): what status calls finished, what a
// scale of it opens again, and a group a --once worker has nothing to do in.
func GroupFinished(st *lock.GroupStatus) bool {
	if st.N == 0 {
		return false
	}
	seen := 0
	for _, s := range st.Slots {
		if s.Slot < st.N {
			if !s.Finished {
				return false
			}
			seen++
		}
	}
	return seen == st.N
}
