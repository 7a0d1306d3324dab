package ddbnum

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCanonical: one form per value, which is also a JSON number; text that is no number is an
// error.
func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "0.000": "0", "100": "100", "1e2": "100", "1E+2": "100", "1.0E-3": "0.001",
		"-12.340": "-12.34", ".5": "0.5", "5.": "5", "+5": "5", " 7 ": "7",
		"123456789012345678901234567890123456789": "123456789012345678901234567890123456789",
		"1e-130": "0." + strings.Repeat("0", 129) + "1",
	} {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("Canonical(%q) = %q: not a JSON number", in, got)
		}
	}
	for _, bad := range []string{"", "abc", "1e", ".", "1.2.3", "--1", "1e5000", "0x10", "NaN", "Inf"} {
		if got, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%q) = %q, want an error", bad, got)
		}
	}
}
