package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteMarkdown writes a scenario's runs as a section of RELIABILITY.md.
func WriteMarkdown(w io.Writer, title, what string, runs []*Result) {
	fmt.Fprintf(w, "## %s\n\n%s\n\n", title, what)
	fmt.Fprintln(w, "| seed | items | done | completed twice | missing | side-effect dups (bound) | unrecorded | takeovers | lease reads | wall | held |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		held := "yes"
		if !r.OK() {
			held = "**NO**"
		}
		fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d (%d) | %d | %d | %d | %.1fs | %s |\n", r.Seed, r.Items, r.Done,
			r.CompletedTwice, r.Missing, r.SideEffectDuplicates, r.SideEffectBound, r.Unrecorded, r.Takeovers, r.Leases.Reads,
			r.Wall.Seconds(), held)
	}
	fmt.Fprintln(w)
	for _, r := range runs {
		if len(r.Events) == 0 && len(r.Violations) == 0 && len(r.Faults) == 0 {
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
		for _, v := range r.Violations {
			fmt.Fprintf(w, "- **violation:** %s\n", v)
		}
		fmt.Fprint(w, "\n</details>\n\n")
	}
}
