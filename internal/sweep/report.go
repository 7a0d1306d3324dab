package sweep

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteMarkdown writes the sweep's section of RELIABILITY.md.
func WriteMarkdown(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "## Deterministic fault sweep\n\n")
	fmt.Fprintf(w, "`internal/sweep` (the fault-injecting client is the public package `ddbfault`): a once-run of %d items, "+
		"short timings, one or two workers; a fault-free baseline counts its DynamoDB calls K, then runs with one fault at "+
		"the k-th call: %s. Kinds: %s. Checked after each run: a run that returned nil left every item done or failed; no item settled twice "+
		"(writes that landed, also unanswered ones); dead letters only for permanent handler failures; side effects repeated "+
		"only for items in flight at the fault; lease tokens only grow and never have two owners. Replay a case with "+
		"`SWEEP_CASE=<case> go test -run TestSweepCase ./internal/sweep/` or `go run ./internal/sweep/run -case <case>`.\n\n",
		Items, planText(s.Plan), kindList(s))
	fmt.Fprintln(w, "| combinations | runs | faults injected | runs with violations | violations | runs where Run returned an error | wall |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d | %s |\n\n", s.Combos, s.Runs, s.Injected, s.Broken, s.Violations, s.RunErrors, s.Wall.Round(1e9))
	if len(s.ByKind) > 0 {
		parts := make([]string, len(s.Plan.Kinds))
		for i, k := range s.Plan.Kinds {
			parts[i] = fmt.Sprintf("%s %d", k, s.ByKind[k])
		}
		fmt.Fprintf(w, "Faulted runs per kind: %s.\n\n", strings.Join(parts, ", "))
	}
	if len(s.Failures) == 0 {
		return
	}
	// Group violations by what broke (item names and numbers removed), with a case to replay.
	type group struct {
		n       int
		example string
	}
	groups := map[string]*group{}
	for _, r := range s.Failures {
		for _, v := range r.Violations {
			k := normalize(v)
			if groups[k] == nil {
				groups[k] = &group{example: r.Case.String()}
			}
			groups[k].n++
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return groups[keys[i]].n > groups[keys[j]].n })
	fmt.Fprintln(w, "| violation | count | a case to replay |\n|---|---|---|")
	for _, k := range keys {
		fmt.Fprintf(w, "| %s | %d | `%s` |\n", strings.ReplaceAll(k, "|", "\\|"), groups[k].n, groups[k].example)
	}
	fmt.Fprintln(w)
}

// planText says which k and kinds the plan ran.
func planText(p Plan) string {
	if p.PerCombo > 0 {
		return fmt.Sprintf("a seeded sample (seed %d) of %d faulted runs per combination, k drawn from each of %d equal "+
			"bands of 1..K, the kinds in rotation over the combinations (each kind equally often; replay the sample with "+
			"`go run ./internal/sweep/run -per-combo %d -seed %d`). The exhaustive sweep is `go run ./internal/sweep/run "+
			"-stride 1` (every kind at every k; about 7 x 90 minutes here) or `-stride 7` (every k meets one kind, "+
			"about 90 minutes)", p.Seed, p.PerCombo, p.PerCombo, p.PerCombo, p.Seed)
	}
	return fmt.Sprintf("kind i at k = 1 + i, 1 + i + stride, ... up to K (stride %d)", p.Stride)
}

func kindList(s *Summary) string {
	parts := make([]string, len(s.Plan.Kinds))
	for i, k := range s.Plan.Kinds {
		parts[i] = string(k)
	}
	return strings.Join(parts, ", ")
}

// normalize drops item ids and counts from a violation, to group like ones.
func normalize(v string) string {
	v = idPattern.ReplaceAllString(v, "item")
	v = strings.ReplaceAll(v, "handler calls 0)", "handler never ran)") // a separate path from a handled item
	return digits.ReplaceAllString(v, "N")
}
