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
		// Spellings DynamoDB takes whose exponent as written is past 1000.
		"0e2000": "0", "-0e99999": "0", "1" + strings.Repeat("0", 1001) + "e-1001": "1",
		"0." + strings.Repeat("0", 1000) + "1e1001": "1",
	} {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("Canonical(%q) = %q: not a JSON number", in, got)
		}
	}
	for _, bad := range []string{"", "abc", "1e", ".", "1.2.3", "--1", "1e5000", "1e-1001", "0x10", "NaN", "Inf"} {
		if got, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%q) = %q, want an error", bad, got)
		}
	}
}

// TestCanonicalTakesWhatCheckPasses: every number DynamoDB stores (Check) has a canonical form.
func TestCanonicalTakesWhatCheckPasses(t *testing.T) {
	for _, s := range []string{"0e1001", "0e2000", "0e99999", "1" + strings.Repeat("0", 1001) + "e-1001",
		"0." + strings.Repeat("0", 1000) + "1e1001", "1e125", "-1e-130", "12345678901234567890123456789012345678e-167"} {
		if err := Check(s); err != nil {
			t.Fatalf("Check(%q) = %v; the case tests nothing", s, err)
		}
		if _, err := Canonical(s); err != nil {
			t.Errorf("Canonical(%q) = %v, but Check passes it", s, err)
		}
	}
}
