package worker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// slotCheckpoint is what the lease's checkpoint holds: the plan epoch it was made under (see
// replan.go), the pass number, whether the pass met items that still need another pass (retries,
// items claimed elsewhere), the slot's counts and the scan position.
type slotCheckpoint struct {
	epoch int64
	n     int // the group's n at epoch (0 in checkpoints made before plan epochs)
	// run is the lease token of the holder that started the pass (0 in checkpoints made before
	// work stealing): with the pass number it names the pass's unit markers (see steal.go), so
	// that a pass run again after lock.Client.ResetGroup never meets an earlier run's markers. A
	// one-slot plan writes no markers (marksUnits), so there run names none: it is 0 until a
	// dirty pass's next, and ignored.
	run    int64
	pass   int
	dirty  bool
	counts slotCounts
	scan   string
}

// slotCounts are a slot's progress, saved with its checkpoint so `dynapart status` can show it
// without reading the table: done and failed count the items the slot's holders (and the thieves
// that read units of its share, see steal.go) moved to done or failed over all passes; scanned
// (also the thieves' reads of its units) and elapsed (the holders' working time, pauses excluded)
// are the current pass's. They are exact after a clean run;
// a holder that dies loses (or a takeover repeats) what it counted since its last checkpoint save.
type slotCounts struct {
	done, failed, scanned int64
	elapsed               time.Duration // kept in whole milliseconds
	// since is the time from which the slot needs the stream's records (follow_trim.go), by its
	// holders' clocks: the start of the slot's current pass, carried over dirty passes (by the
	// holder that began it, or first resumed it from a checkpoint made before this field), and,
	// once the slot follows the stream, how far the group had read it (keepFollowing: every
	// record the group needs created before it is read). Zero until then. It is compared with the
	// stream's retention.
	since time.Time
}

// The checkpoint encodings: dp1|pass|dirty|scan (before counts; decodes with zero counts),
// dp2|pass|dirty|done.failed.scanned.ms|scan (before plan epochs; decodes with epoch 0) and
// dp3|epoch.n[.run]|pass|dirty|done.failed.scanned.ms[.since]|scan (run absent: 0; since in Unix
// milliseconds, absent: zero).
const (
	checkpointPrefixV1 = "dp1"
	checkpointPrefixV2 = "dp2"
	checkpointPrefix   = "dp3"
)

func (s slotCheckpoint) encode() string {
	d := "0"
	if s.dirty {
		d = "1"
	}
	c := s.counts
	counts := strconv.FormatInt(c.done, 10) + "." + strconv.FormatInt(c.failed, 10) + "." +
		strconv.FormatInt(c.scanned, 10) + "." + strconv.FormatInt(c.elapsed.Milliseconds(), 10)
	if !c.since.IsZero() {
		counts += "." + strconv.FormatInt(c.since.UnixMilli(), 10)
	}
	plan := strconv.FormatInt(s.epoch, 10) + "." + strconv.Itoa(s.n)
	if s.run != 0 {
		plan += "." + strconv.FormatInt(s.run, 10)
	}
	return checkpointPrefix + "|" + plan + "|" + strconv.Itoa(s.pass) + "|" + d + "|" + counts + "|" + s.scan
}

// next is the checkpoint a new pass started by the holder of token run starts from: the next pass
// number, the slot's done and failed counts carried over, the pass's own counts and position empty.
func (s slotCheckpoint) next(run int64) slotCheckpoint {
	return slotCheckpoint{epoch: s.epoch, n: s.n, run: run, pass: s.pass + 1, counts: slotCounts{done: s.counts.done, failed: s.counts.failed}}
}

// withoutElapsed is s without its working time: the checkpoint saver compares it, so time alone
// passing is no reason to write.
func (s slotCheckpoint) withoutElapsed() slotCheckpoint {
	s.counts.elapsed = 0
	return s
}

func decodeSlotCheckpoint(v string) (slotCheckpoint, error) {
	if v == "" {
		return slotCheckpoint{}, nil
	}
	// The fields after the prefix: [epoch.n|]pass|dirty[|counts]|scan.
	withEpoch, withCounts := false, true
	switch {
	case strings.HasPrefix(v, checkpointPrefix+"|"):
		withEpoch = true
	case strings.HasPrefix(v, checkpointPrefixV2+"|"):
	case strings.HasPrefix(v, checkpointPrefixV1+"|"):
		withCounts = false
	default:
		return slotCheckpoint{}, fmt.Errorf("dynapart: malformed slot checkpoint (want %s|epoch.n|pass|dirty|counts|scan)", checkpointPrefix)
	}
	fields := 4
	if withEpoch {
		fields++
	}
	if withCounts {
		fields++
	}
	parts := strings.SplitN(v, "|", fields)
	if len(parts) != fields {
		return slotCheckpoint{}, fmt.Errorf("dynapart: malformed slot checkpoint (want %s|epoch.n|pass|dirty|counts|scan)", checkpointPrefix)
	}
	var cp slotCheckpoint
	parts = parts[1:]
	if withEpoch {
		e, n, run, ok := decodePlan(parts[0])
		if !ok {
			return slotCheckpoint{}, fmt.Errorf("dynapart: malformed slot checkpoint plan %q (want epoch.n[.run])", parts[0])
		}
		cp.epoch, cp.n, cp.run, parts = e, n, run, parts[1:]
	}
	pass, err := strconv.Atoi(parts[0])
	if err != nil || pass < 0 || (parts[1] != "0" && parts[1] != "1") {
		return slotCheckpoint{}, fmt.Errorf("dynapart: malformed slot checkpoint header %q", parts[0]+"|"+parts[1])
	}
	cp.pass, cp.dirty, cp.scan = pass, parts[1] == "1", parts[len(parts)-1]
	if withCounts {
		if cp.counts, err = decodeCounts(parts[2]); err != nil {
			return slotCheckpoint{}, err
		}
	}
	return cp, nil
}

func decodeCounts(v string) (slotCounts, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 4 && len(parts) != 5 {
		return slotCounts{}, fmt.Errorf("dynapart: malformed slot checkpoint counts %q (want done.failed.scanned.ms[.since])", v)
	}
	var n [5]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil || x < 0 || (i == 3 && x > math.MaxInt64/int64(time.Millisecond)) {
			return slotCounts{}, fmt.Errorf("dynapart: malformed slot checkpoint counts %q", v)
		}
		n[i] = x
	}
	c := slotCounts{done: n[0], failed: n[1], scanned: n[2], elapsed: time.Duration(n[3]) * time.Millisecond}
	if len(parts) == 5 {
		c.since = time.UnixMilli(n[4])
	}
	return c, nil
}

// decodePlan decodes the epoch.n[.run] field of a dp3 checkpoint.
func decodePlan(v string) (epoch int64, n int, run int64, ok bool) {
	es, rest, found := strings.Cut(v, ".")
	ns, rs, withRun := strings.Cut(rest, ".")
	e, err1 := strconv.ParseInt(es, 10, 64)
	n, err2 := strconv.Atoi(ns)
	if !found || err1 != nil || err2 != nil || e < 0 || n < 0 {
		return 0, 0, 0, false
	}
	if withRun {
		r, err := strconv.ParseInt(rs, 10, 64)
		if err != nil || r < 1 {
			return 0, 0, 0, false
		}
		run = r
	}
	return e, n, run, true
}
