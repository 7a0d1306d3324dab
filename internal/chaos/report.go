package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// leaseWrites is the report's "lease writes checked" cell: the stream records the history was
// checked on, or the number of polls when the stream could not be read.
func leaseWrites(l LeaseReport) string {
	if l.Source == "stream" {
		return fmt.Sprint(l.StreamRecords)
	}
	return fmt.Sprintf("%d polls only", l.Reads)
}

// WriteMarkdown writes a scenario's runs as a section of RELIABILITY.md.
func WriteMarkdown(w io.Writer, title, what string, runs []*Result) {
	fmt.Fprintf(w, "## %s\n\n%s\n\n", title, what)
	fmt.Fprintln(w, "| seed | items | done | completed twice | missing | side-effect dups (bound) | unrecorded | takeovers | leases lost by load | lease writes checked | wall | held |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		held := "yes"
		if !r.OK() {
			held = "**NO**"
		}
		fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d (%d) | %d | %d | %d | %s | %.1fs | %s |\n", r.Seed, r.Items, r.Done,
			r.CompletedTwice, r.Missing, r.SideEffectDuplicates, r.SideEffectBound, r.Unrecorded, r.Takeovers, r.LeasesLost, leaseWrites(r.Leases),
			r.Wall.Seconds(), held)
	}
	fmt.Fprintln(w)
	for _, r := range runs {
		if len(r.Events) == 0 && len(r.Violations) == 0 && len(r.Faults) == 0 && r.Leases.Source == "stream" {
			continue
		}
		fmt.Fprintf(w, "<details><summary>seed %d</summary>\n\n", r.Seed)
		for _, e := range r.Events {
			fmt.Fprintf(w, "- %s\n", e)
		}
		if len(r.Faults) > 0 {
			keys := make([]string, 0, len(r.Faults))
			for k := range r.Faults {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = fmt.Sprintf("%s: %d", k, r.Faults[k])
			}
			fmt.Fprintf(w, "- requests by fault and operation: %s\n", strings.Join(parts, ", "))
		}
		if r.Leases.Source == "stream" {
			fmt.Fprintf(w, "- lease history (stream): %d writes, %d acquisitions, %d takeovers, %d releases, %d released slots taken again by the same worker\n",
				r.Leases.StreamRecords, r.Leases.Acquisitions, r.Leases.Takeovers, r.Leases.Releases, r.Leases.Retakes)
		}
		if r.Leases.Source != "" && r.Leases.Source != "stream" {
			fmt.Fprintf(w, "- lease history from %s\n", r.Leases.Source)
		}
		for _, v := range r.Violations {
			fmt.Fprintf(w, "- **violation:** %s\n", v)
		}
		fmt.Fprint(w, "\n</details>\n\n")
	}
}
