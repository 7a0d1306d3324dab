package chaos

import (
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
)

// flaky is a scenario's failing handlers: a seeded set of items whose --exec fails its first run
// (exit 75, a transient failure the worker retries) and a set whose --exec always exits 65 (a
// permanent failure: dead-lettered at once). The sets are files the command greps; the first
// failure of a transient item is recorded in a third file, so a retry (by any worker) succeeds.
type flaky struct {
	transient, permanent map[string]bool
	transFile, permFile  string
	tried                string // keys whose transient failure happened, a line per failed run
}

func newFlaky(dir string, p Params, rng *mrand.Rand) (*flaky, error) {
	fl := &flaky{transient: map[string]bool{}, permanent: map[string]bool{},
		transFile: filepath.Join(dir, "transient.keys"), permFile: filepath.Join(dir, "permanent.keys"),
		tried: filepath.Join(dir, "transient-failed.keys")}
	for i := range p.Items {
		k := fmt.Sprintf(`{"id":"item-%08d"}`, i) // dynapart seed's keys, as DYNAPART_KEY renders them
		switch x := rng.Float64(); {
		case x < p.Permanent:
			fl.permanent[k] = true
		case x < p.Permanent+p.Transient:
			fl.transient[k] = true
		}
	}
	counts := func(m map[string]bool) map[string]int {
		out := make(map[string]int, len(m))
		for k := range m {
			out[k] = 1
		}
		return out
	}
	if err := writeLines(fl.transFile, counts(fl.transient)); err != nil {
		return nil, err
	}
	if err := writeLines(fl.permFile, counts(fl.permanent)); err != nil {
		return nil, err
	}
	return fl, nil
}

// script is the start of the --exec command: it exits for a failing item, else falls through to
// the side effect.
func (fl *flaky) script() string {
	return fmt.Sprintf(`if grep -qxF "$DYNAPART_KEY" '%s'; then echo 'permanent (chaos)' >&2; exit 65; fi; `+
		`if grep -qxF "$DYNAPART_KEY" '%s' && ! grep -qxF "$DYNAPART_KEY" '%s' 2>/dev/null; then `+
		`printf '%%s\n' "$DYNAPART_KEY" >> '%s'; echo 'transient (chaos)' >&2; exit 75; fi; `,
		fl.permFile, fl.transFile, fl.tried, fl.tried)
}

// transientFailures counts the handler runs that failed transiently.
func (fl *flaky) transientFailures() (int, error) {
	m := map[string]int{}
	if err := readLines(fl.tried, m); err != nil {
		return 0, err
	}
	n := 0
	for _, v := range m {
		n += v
	}
	return n, nil
}
