package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dynapart/dynapart/internal/progress"
)

// TwoGroups runs two groups of workers on one table at once: different group names, the same
// job and inline ledger (so they share the items' state) and the same lease table. Each group
// covers every item, so each meets the other's claims; a claim of one group must never be taken
// by the other while it lasts (issue 12, hole 4). The handler marks its item in flight with a
// directory (mkdir is atomic), so two handlers of one item at the same time are seen; the audit
// expects none, no item completed twice, and the lease history of each group to hold.
func TwoGroups(ctx context.Context, env Env, p Params) *Result {
	return run(ctx, env, "two-groups", p, env.Endpoint, func(ctx context.Context, f *fixture) error {
		groups := []string{f.table + "/a", f.table + "/b"}
		inflight := filepath.Join(f.dir, "inflight")
		overlaps := filepath.Join(f.dir, "overlaps.keys")
		if err := mkdir(inflight); err != nil {
			return err
		}
		// The key's id (item-00000012) names the marker, which holds the group of its handler;
		// the handler takes 50ms, so two handlers of one item would overlap if both held a claim.
		handler := func(g string) string {
			return fmt.Sprintf(`k=${DYNAPART_KEY#*:\"}; k=${k%%\"\}}; d='%s/'"$k"; `+
				`if mkdir "$d" 2>/dev/null; then printf '%%s' '%s' > "$d/g"; `+
				`else printf '%%s %%s %%s\n' "$DYNAPART_KEY" '%s' "$(cat "$d/g" 2>/dev/null)" >> '%s'; fi; `+
				`%s; sleep 0.05; rm -rf "$d"; true`, inflight, g, g, overlaps, f.handler())
		}
		// Longer leases than the other scenarios: six workers share the machine, and a lease lost
		// by load is a takeover inside a group, which this scenario is not about.
		lease := []string{"--lease-ttl", "5s", "--heartbeat", "1s"}
		watchers := map[string]*LeaseWatcher{}
		for _, g := range groups {
			watchers[g] = WatchLeases(f.db, f.env.Streams(f.direct), f.leases, g, 20*time.Millisecond)
		}
		groupOf := map[string]string{}
		for _, g := range groups { // the groups start side by side: holders of a, of b, then standbys
			for range f.p.Slots {
				w, err := f.start(append(lease, "--group", g, "--exec", handler(g))...)
				if err != nil {
					return err
				}
				groupOf[w.Owner] = g
			}
		}
		for _, w := range f.procs {
			if _, err := w.WaitLine(ctx, 0, func(l progress.Line) bool { return l.Event == "lease-acquired" }); err != nil {
				return fmt.Errorf("%w\n%s", err, w.LogTail(2000))
			}
		}
		for _, g := range groups {
			for range f.p.Standbys {
				w, err := f.start(append(lease, "--group", g, "--exec", handler(g))...)
				if err != nil {
					return err
				}
				groupOf[w.Owner] = g
			}
		}
		f.res.event("groups %s and %s, %d slots + %d standbys each, on one table, job and lease table", groups[0], groups[1], f.p.Slots, f.p.Standbys)
		f.audits = append(f.audits, func(r *Result, a *audit) { twoGroupsAudit(r, a, groups, groupOf, watchers, overlaps) })
		return nil
	})
}

// twoGroupsAudit stops the groups' lease watchers, checks each group's history and that every
// done item was completed by the holder of its claim's (slot, token) in the completer's group,
// and counts the items handled by both groups at once.
func twoGroupsAudit(r *Result, a *audit, groups []string, groupOf map[string]string, watchers map[string]*LeaseWatcher, overlaps string) {
	reports := map[string]LeaseReport{}
	for _, g := range groups {
		watchers[g].Stop()
		reports[g] = watchers[g].Report()
	}
	merged := LeaseReport{Source: "stream", Owners: map[[2]int64]string{}}
	for _, g := range groups {
		l := reports[g]
		if l.Source != "stream" {
			merged.Source = fmt.Sprintf("%s (group %s)", l.Source, g)
		}
		merged.Reads += l.Reads
		merged.ReadErrors += l.ReadErrors
		merged.Acquisitions += l.Acquisitions
		merged.Takeovers += l.Takeovers
		merged.StreamRecords += l.StreamRecords
		merged.StreamErrors += l.StreamErrors
		merged.Releases += l.Releases
		merged.Retakes += l.Retakes
		for _, v := range l.Violations {
			r.fail("lease history of %s: %s", g, v)
		}
		r.event("group %s: %d lease writes, %d acquisitions, %d takeovers", g, l.StreamRecords, l.Acquisitions, l.Takeovers)
	}
	r.Leases = merged
	mismatch := 0
	for k, row := range a.ledger {
		if row.status != "done" {
			continue
		}
		g, ok := groupOf[row.owner]
		if !ok {
			r.fail("%s done by %s, which no group started", k, row.owner)
			continue
		}
		if o, ok := reports[g].Owners[[2]int64{row.slot, row.token}]; ok && o != row.owner {
			mismatch++
			if mismatch <= 5 {
				r.fail("%s done by %s under slot %d token %d of %s, which that group's lease history gives to %s", k, row.owner, row.slot, row.token, g, o)
			}
		}
	}
	// A line is "key group-of-this-handler group-of-the-one-in-flight". Overlaps inside one group
	// follow a takeover or a lease its holder lost by its clock (bounded with the side effects);
	// across groups they are a stolen claim.
	lines := map[string]int{}
	if err := readLines(overlaps, lines); err != nil {
		r.fail("%v", err)
	}
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	across, within := 0, 0
	for _, l := range keys {
		f := strings.Fields(l)
		if len(f) == 3 && f[1] == f[2] {
			within += lines[l]
			continue
		}
		across += lines[l]
		if across <= 5 {
			r.fail("handled by two groups at once (key, this group, the group in flight): %s", l)
		}
	}
	r.SideEffectBound += (merged.Takeovers + merged.Retakes) * r.Params.Concurrency
	r.event("handlers of one item at once: %d across the groups, %d inside a group (after its %d takeovers and %d retakes)",
		across, within, merged.Takeovers, merged.Retakes)
}
