package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
)

// handlerRun is one run of the follow scenario's handler, a line of its log: the item's key, the
// value of n it was given, DYNAPART_VERSION, the worker, the lease (slot, token) it ran under and
// when it started.
type handlerRun struct {
	key     string
	value   int64
	version string
	owner   string
	lease   [2]int64
	at      time.Time
}

func (r handlerRun) String() string {
	return fmt.Sprintf("%d by %s (slot %d token %d) at %s", r.value, r.owner, r.lease[0], r.lease[1], r.at.Format("15:04:05.000"))
}

// noValue is the value of a run whose item JSON had no n: its stdin was cut short, as when its
// worker is killed while writing it (the handler outlives its worker).
const noValue = -1

// parseHandlerRun parses a line "KEY VALUE VERSION OWNER SLOT TOKEN UNIXTIME" (UNIXTIME as date
// +%s.%N prints it). Fields are split on single spaces, so an empty one is seen.
func parseHandlerRun(line string) (handlerRun, error) {
	f := strings.Split(line, " ")
	if len(f) != 7 {
		return handlerRun{}, fmt.Errorf("%d fields", len(f))
	}
	var r handlerRun
	var err error
	r.key, r.version, r.owner = f[0], f[2], f[3]
	switch {
	case f[1] == "":
		r.value = noValue
	default:
		if r.value, err = strconv.ParseInt(f[1], 10, 64); err != nil {
			return r, fmt.Errorf("value: %w", err)
		}
	}
	if r.lease[0], err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return r, fmt.Errorf("slot: %w", err)
	}
	if r.lease[1], err = strconv.ParseInt(f[5], 10, 64); err != nil {
		return r, fmt.Errorf("token: %w", err)
	}
	sec, nsec, _ := strings.Cut(f[6], ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ns, err2 := strconv.ParseInt((nsec + "000000000")[:9], 10, 64)
	if err1 != nil || err2 != nil {
		return r, fmt.Errorf("time %q", f[6])
	}
	r.at = time.Unix(s, ns)
	if r.key == "" || r.version == "" || r.owner == "" {
		return r, fmt.Errorf("an empty key, version or owner")
	}
	return r, nil
}

// runLog reads the handler log as it grows (complete lines only).
type runLog struct {
	path    string
	off     int64
	partial []byte
	runs    []handlerRun
	bad     []string // lines that do not parse
}

func (l *runLog) read() error {
	fh, err := os.Open(l.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	if _, err := fh.Seek(l.off, io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(fh)
	if err != nil {
		return err
	}
	l.off += int64(len(b))
	b = append(l.partial, b...)
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		l.partial = b
		return nil
	}
	for _, line := range strings.Split(string(b[:end]), "\n") {
		if line == "" {
			continue
		}
		r, err := parseHandlerRun(line)
		if err != nil {
			l.bad = append(l.bad, fmt.Sprintf("%q: %v", line, err))
			continue
		}
		l.runs = append(l.runs, r)
	}
	l.partial = append([]byte(nil), b[end+1:]...)
	return nil
}

// followFault is a worker the scenario killed or froze and the lease it held: its handler runs
// under that lease may have been cut off before their completion, and run again elsewhere.
type followFault struct {
	kind  string
	owner string
	lease [2]int64
}

// finalItem is an item of the table after the run: its n, the version of its content and its
// ledger state.
type finalItem struct {
	n       int64
	hasN    bool
	version string
	st      ledger.ItemState
}

// followAudit checks the follow scenario's handler runs and completions (every write that moved
// an item to done, read from the ledger's stream) against the writer's history and the table's
// end state:
//   - every live item's latest value was handled, and its ledger state is done at the version of
//     its current content (missing);
//   - an item's values are handled, and completed, in the writer's order: never a value after a
//     newer one (a run cut off by a fault, see below, that starts late is reported, not failed:
//     a worker frozen between its claim and its handler's start starts the handler when it
//     resumes);
//   - a version is completed once (completed twice);
//   - a value is handled once, but for runs that never completed because their worker was killed
//     or frozen holding the lease they ran under, or lost that lease by load. A repeat that is
//     not one of those is a violation, named when it follows a rewrite of the same value or the
//     item's delete;
//   - DYNAPART_VERSION is one version per value, and the latest value's is the version the
//     ledger computes for the item's content; every completion's version is one a handler ran;
//   - no deleted item is back, and no item is finished under a lease its lease history gives to
//     another worker.
type followAudit struct {
	hist        *followHistory
	runs        []handlerRun
	bad         []string
	faults      []followFault
	lost        map[[2]int64]bool   // leases lost by load
	owners      map[[2]int64]string // lease history: (slot, token) -> owner
	records     map[string]int      // key -> completions the workers' --record files list
	completions map[string][]completionRec
	final       map[string]finalItem
}

// cutOff reports whether run was under a lease its worker lost to one of the scenario's faults or
// to load: such a run may end without its completion.
func (a *followAudit) cutOff(run handlerRun) bool {
	if a.lost[run.lease] {
		return true
	}
	for _, f := range a.faults {
		if run.owner == f.owner && run.lease == f.lease {
			return true
		}
	}
	return false
}

func (a *followAudit) apply(r *Result) {
	for i, b := range a.bad {
		if i < 5 {
			r.fail("handler log: %s", b)
		}
	}
	byKey := map[string][]handlerRun{}
	cut := 0
	for _, run := range a.runs {
		if run.value == noValue {
			if !slices.ContainsFunc(a.faults, func(f followFault) bool { return f.kind == "SIGKILL" && f.owner == run.owner && f.lease == run.lease }) {
				r.fail("a handler run got no item (no n on its stdin) from a worker that was not killed: %s %s", run.key, run)
			}
			cut++
			continue
		}
		byKey[run.key] = append(byKey[run.key], run)
	}
	if cut > 0 {
		r.event("%d handler runs of killed workers got their item cut short (the worker died while writing it to the handler's stdin): not counted", cut)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
		sort.SliceStable(byKey[k], func(i, j int) bool { return byKey[k][i].at.Before(byKey[k][j].at) })
	}
	sort.Strings(keys)
	var c followCounts
	for _, k := range keys {
		a.checkItem(r, k, byKey[k], &c)
	}
	a.checkLive(r, byKey, &c)
	a.checkFinal(r)
	r.event("handler runs: %d (%d items, %d values); completions: %d; %d values written were never handled (superseded before a worker got to them)",
		len(a.runs), len(byKey), c.handledValues, c.completions, c.skipped)
	r.event("values handled more than once: %d (%d runs beyond the first); runs that did not complete: %d cut off by a fault or a lease lost by load before the value's completion, %d not (of them %d after a rewrite of the same value, %d after the item's delete)",
		c.repeatedValues, r.SideEffectDuplicates, c.excused, c.unexcused, c.afterRewrite, c.afterDelete)
	if c.late > 0 {
		r.event("%d runs under a lease lost to a fault or to load started after a newer value's run or after their own value's completion (a worker frozen between its claim and its handler's start), e.g. %s",
			c.late, c.firstLate)
	}
	if c.unexcused > 0 {
		r.fail("%d handler runs repeat a value with no fault to explain it, e.g. %s", c.unexcused, c.firstUnexcused)
	}
	if c.wentBack > 0 {
		r.fail("%d handler runs handle an older value after a newer one of the same item, e.g. %s", c.wentBack, c.firstWentBack)
	}
	if c.doneBack > 0 {
		r.fail("%d completions record an older version after a newer one of the same item, e.g. %s", c.doneBack, c.firstDoneBack)
	}
	if c.lateDeleted > 0 {
		r.event("%d runs of deleted items started after the delete returned (claimed or read before it), the latest %s after: %s",
			c.lateDeleted, c.maxDeleteLag.Round(time.Millisecond), c.maxDeleteLagRun)
	}
}

// followCounts are the audit's tallies.
type followCounts struct {
	handledValues, skipped        int
	excused, unexcused            int
	afterRewrite, afterDelete     int
	wentBack, lateDeleted         int
	maxDeleteLag                  time.Duration
	maxDeleteLagRun               string
	firstUnexcused, firstWentBack string
	late                          int
	firstLate                     string
	versionMismatchCnt            int
	completions, repeatedValues   int
	doneBack                      int
	firstDoneBack                 string
}

// checkItem checks one item's runs (sorted by start) against the writer's order of its values.
func (a *followAudit) checkItem(r *Result, k string, runs []handlerRun, c *followCounts) {
	it, ok := a.hist.items[k]
	if !ok {
		r.fail("handler ran for %s, which the table never held", k)
		return
	}
	pos := make(map[int64]int, len(it.values))
	for i, v := range it.values {
		pos[v] = i
	}
	maxPos := -1
	byValue := map[int64][]handlerRun{}
	versionOf, valueOf := map[int64]string{}, map[string]int64{}
	for _, run := range runs {
		p, ok := pos[run.value]
		if !ok {
			r.fail("%s handled at value %d, which the writer never wrote to it (values %v)", k, run.value, it.values)
			continue
		}
		switch {
		case p < maxPos && a.cutOff(run):
			// A worker frozen between its claim and its handler's start may start the handler
			// when it resumes, before it notices that its lease and claim are gone.
			c.late++
			if c.firstLate == "" {
				c.firstLate = fmt.Sprintf("%s: %s after %d (runs %v)", k, run, it.values[maxPos], runs)
			}
		case p < maxPos:
			c.wentBack++
			if c.firstWentBack == "" {
				c.firstWentBack = fmt.Sprintf("%s: %s after %d (runs %v, values written %v)", k, run, it.values[maxPos], runs, it.values)
			}
		}
		maxPos = max(maxPos, p)
		byValue[run.value] = append(byValue[run.value], run)
		if v, ok := versionOf[run.value]; ok && v != run.version {
			r.fail("%s value %d handled as versions %s and %s", k, run.value, v, run.version)
		}
		if v, ok := valueOf[run.version]; ok && v != run.value {
			r.fail("%s values %d and %d handled as one version %s", k, v, run.value, run.version)
		}
		versionOf[run.value], valueOf[run.version] = run.version, run.value
		if !it.deleted.IsZero() && run.at.After(it.deleted) {
			c.lateDeleted++
			if lag := run.at.Sub(it.deleted); lag > c.maxDeleteLag {
				c.maxDeleteLag = lag
				c.maxDeleteLagRun = fmt.Sprintf("%s %s, deleted at %s", k, run, it.deleted.Format("15:04:05.000"))
			}
		}
	}
	c.handledValues += len(byValue)
	c.skipped += len(it.values) - len(byValue)
	doneBy := a.checkCompletions(r, k, runs, pos, valueOf, c)
	for v, vr := range byValue {
		if len(vr) < 2 {
			continue
		}
		c.repeatedValues++
		r.SideEffectDuplicates += len(vr) - 1
		// The runs that completed the value: for each completion, the first run of its worker and
		// lease not taken by an earlier one (more than one is a version completed twice, failed
		// above). The other runs never completed.
		completed := map[int]bool{}
		done := -1
		for _, cr := range doneBy[v] {
			i := slices.IndexFunc(vr, func(run handlerRun) bool { return run.owner == cr.owner && run.lease == cr.lease })
			for i >= 0 && completed[i] {
				j := slices.IndexFunc(vr[i+1:], func(run handlerRun) bool { return run.owner == cr.owner && run.lease == cr.lease })
				if j < 0 {
					i = -1
				} else {
					i += 1 + j
				}
			}
			if i >= 0 {
				completed[i] = true
				if done < 0 || i < done {
					done = i
				}
			}
		}
		unexplained := 0
		var first string
		for i, run := range vr {
			switch {
			case completed[i]:
				continue
			case a.cutOff(run):
				c.excused++
				if done >= 0 && i > done {
					c.late++ // see the order check above
					if c.firstLate == "" {
						c.firstLate = fmt.Sprintf("%s value %d: %s after %s completed it (runs %v)", k, v, run, vr[done], vr)
					}
				}
				continue
			}
			unexplained++
			if first != "" {
				continue
			}
			first = fmt.Sprintf("%s value %d, run %s", k, v, run)
			if slices.ContainsFunc(it.rewrites, func(rw valueAt) bool { return rw.value == v && rw.at.After(vr[0].at) && rw.at.Before(run.at) }) {
				c.afterRewrite++
				first += " after a rewrite of the same value"
			}
			if !it.deleted.IsZero() && run.at.After(it.deleted) {
				c.afterDelete++
				first += " after the item's delete"
			}
			first += fmt.Sprintf(" (runs %v, completions %v)", vr, a.completions[k])
		}
		if done < 0 && unexplained > 0 {
			unexplained-- // no completion: one run may have been cut short by a newer version or the delete
		}
		c.unexcused += unexplained
		if unexplained > 0 && c.firstUnexcused == "" {
			c.firstUnexcused = first
		}
	}
}

// checkCompletions checks an item's completions: each records a version a handler ran, no version
// twice, in the writer's order. It returns the completions of each value.
func (a *followAudit) checkCompletions(r *Result, k string, runs []handlerRun, pos map[int64]int, valueOf map[string]int64, c *followCounts) map[int64][]completionRec {
	doneBy := map[int64][]completionRec{}
	last := -1
	for _, cr := range a.completions[k] {
		c.completions++
		v, ok := valueOf[cr.version]
		if !ok {
			r.fail("%s completed by %s at version %s, which no handler run was given (runs %v)", k, cr.owner, cr.version, runs)
			continue
		}
		if len(doneBy[v]) > 0 {
			doneBy[v] = append(doneBy[v], cr)
			r.CompletedTwice++
			if r.CompletedTwice <= 5 {
				r.fail("%s value %d (version %s) completed twice: completions %v, runs %v", k, v, cr.version, a.completions[k], runs)
			}
			continue
		}
		doneBy[v] = []completionRec{cr}
		if pos[v] < last {
			c.doneBack++
			if c.firstDoneBack == "" {
				c.firstDoneBack = fmt.Sprintf("%s: value %d completed after %d (completions %v, runs %v)", k, v, a.hist.items[k].values[last], a.completions[k], runs)
			}
		}
		last = max(last, pos[v])
	}
	return doneBy
}

// checkLive checks that every live item's latest value was handled and is recorded done at its
// content's version.
func (a *followAudit) checkLive(r *Result, byKey map[string][]handlerRun, c *followCounts) {
	shown := 0
	for k, it := range a.hist.items {
		if !it.deleted.IsZero() {
			continue
		}
		r.Items++
		latest := it.latest()
		var latestRun *handlerRun
		for i, run := range byKey[k] {
			if run.value == latest {
				latestRun = &byKey[k][i]
			}
		}
		fi, inTable := a.final[k]
		doneNow := inTable && fi.st.Status == ledger.StatusDone && fi.version != "" && fi.st.Version == fi.version
		switch {
		case !inTable:
			r.fail("%s is gone from the table, but the writer never deleted it", k)
		case !fi.hasN || fi.n != latest:
			r.fail("%s has n %d (set: %v) in the table, the writer wrote %d last", k, fi.n, fi.hasN, latest)
		}
		if doneNow {
			r.Done++
			if len(a.records) > 0 && a.records[k] == 0 {
				r.Unrecorded++
			}
		}
		if latestRun == nil || !doneNow {
			r.Missing++
			if shown++; shown <= 5 {
				r.fail("%s: latest value %d handled: %v; ledger %s at version %q, content version %q (runs %v)",
					k, latest, latestRun != nil, fi.st.Status, fi.st.Version, fi.version, byKey[k])
			}
			continue
		}
		if latestRun.version != fi.version {
			if c.versionMismatchCnt++; c.versionMismatchCnt <= 5 {
				r.fail("%s: its latest value was handled as version %s, the ledger's version of its content is %s", k, latestRun.version, fi.version)
			}
		}
	}
}

// checkFinal checks the table's items that the writer deleted or never wrote, and that every
// finished item was finished under a lease its owner held.
func (a *followAudit) checkFinal(r *Result) {
	mismatch := 0
	for k, fi := range a.final {
		it, ok := a.hist.items[k]
		switch {
		case !ok:
			r.fail("%s is in the table, but neither seeded nor written", k)
		case !it.deleted.IsZero():
			r.fail("%s is in the table again after its delete (n %v, ledger %s): a write re-created it", k, fi.n, fi.st.Status)
		}
		if !fi.st.Status.Finished() || fi.st.Owner == "" {
			continue
		}
		if o, ok := a.owners[[2]int64{int64(fi.st.Slot), fi.st.Token}]; ok && o != fi.st.Owner {
			if mismatch++; mismatch <= 5 {
				r.fail("%s finished by %s under slot %d token %d, which the lease history gives to %s", k, fi.st.Owner, fi.st.Slot, fi.st.Token, o)
			}
		}
	}
}

// readFinal scans the table (consistent) and reads each item's state from lg.
func readFinal(ctx context.Context, db *dynamodb.Client, table string, lg ledger.Ledger) (map[string]finalItem, error) {
	out := map[string]finalItem{}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("chaos: scan %s: %w", table, err)
		}
		states, err := lg.States(ctx, page.Items)
		if err != nil {
			return nil, fmt.Errorf("chaos: ledger states: %w", err)
		}
		for i, it := range page.Items {
			_, hasN := it["n"].(*types.AttributeValueMemberN)
			out[keyString(map[string]types.AttributeValue{"id": it["id"]})] = finalItem{
				n: nAttr(it, "n"), hasN: hasN, version: lg.ContentVersion(it), st: states[i]}
		}
	}
	return out, nil
}
