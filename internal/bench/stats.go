package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Sample is one measurement repeated: one value per repetition.
type Sample []float64

// Median is the middle value (the mean of the two middle ones for an even count); NaN when empty.
func (s Sample) Median() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// Min is the smallest value; NaN when empty.
func (s Sample) Min() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	return slices.Min(s)
}

// Max is the largest value; NaN when empty.
func (s Sample) Max() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	return slices.Max(s)
}

// Ratio divides s by base repetition by repetition (rep i of s by rep i of base): a ratio taken
// inside one repetition cancels the load the machine had at that moment.
func Ratio(s, base Sample) Sample {
	out := make(Sample, 0, min(len(s), len(base)))
	for i := range min(len(s), len(base)) {
		if base[i] != 0 {
			out = append(out, s[i]/base[i])
		}
	}
	return out
}

// Fmt formats the median and the spread with the given verb and unit: "2,803/s (2,650–2,910)".
func (s Sample) Fmt(prec int, unit string) string {
	if len(s) == 0 {
		return "–"
	}
	m := num(s.Median(), prec) + unit
	if len(s) == 1 {
		return m
	}
	return fmt.Sprintf("%s (%s–%s)", m, num(s.Min(), prec), num(s.Max(), prec))
}

// Counted formats a counted figure (requests, units): the median, and the spread only where the
// repetitions differ at prec decimals ("1.008", "0.404 (0.392–0.410)").
func (s Sample) Counted(prec int) string {
	if len(s) > 0 && num(s.Min(), prec) == num(s.Max(), prec) {
		return num(s.Median(), prec)
	}
	return s.Fmt(prec, "")
}

// X formats a ratio: "0.93x (0.90–0.97)".
func (s Sample) X() string { return s.Fmt(2, "x") }

// GoalX formats a ratio against a goal on its median: X, with a ✗ when the median misses, and with
// more decimals (up to four) where two would round it across the goal (a median of 0.897 against
// >= 0.9 reads "0.897x ✗", not "0.90x ✗").
func (s Sample) GoalX(ok func(float64) bool) string {
	m := s.Median()
	prec := 2
	for prec < 4 && ok(roundTo(m, prec)) != ok(m) {
		prec++
	}
	out := s.Fmt(prec, "x")
	if !ok(m) {
		out += " ✗"
	}
	return out
}

// num formats v with prec decimals and thousands separators.
func num(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	str := fmt.Sprintf("%.*f", prec, math.Abs(v))
	intPart, frac := str, ""
	for i := range str {
		if str[i] == '.' {
			intPart, frac = str[:i], str[i:]
			break
		}
	}
	var b []byte
	for i := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, intPart[i])
	}
	sign := ""
	if v < 0 {
		sign = "-"
	}
	return sign + string(b) + frac
}

// verdict is "met", "NOT met" or "n/a" for a goal.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**NOT met**"
}

// goalCells is a summary cell of a ratio per concurrency ("c=4: 0.93x (0.90–0.97)", a line each,
// see GoalX) and whether every median meets ok; ratio reports false for a concurrency not measured.
func goalCells(concs []int, ratio func(c int) (Sample, bool), ok func(float64) bool) (cell string, all bool) {
	var parts []string
	all = true
	for _, c := range concs {
		x, measured := ratio(c)
		if !measured {
			continue
		}
		all = all && ok(x.Median())
		parts = append(parts, fmt.Sprintf("c=%d: %s", c, x.GoalX(ok)))
	}
	return strings.Join(parts, "<br>"), all
}

// atLeast is a goal on a ratio's median: at least g.
func atLeast(g float64) func(float64) bool { return func(x float64) bool { return x >= g } }

// roundTo rounds v to prec decimals.
func roundTo(v float64, prec int) float64 {
	p := math.Pow10(prec)
	return math.Round(v*p) / p
}
