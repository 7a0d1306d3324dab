package ddbnum

import (
	"strings"
	"testing"
)

// TestCheck: DynamoDB's numbers are 38 significant digits with magnitudes from 1E-130 to
// 9.99...E+125; zero and trailing or leading zeros of any count are fine.
func TestCheck(t *testing.T) {
	for s, ok := range map[string]bool{
		"0": true, "-0": true, "0.000": true, "1": true, "-1.5e3": true, "1E-130": true, "-1E-130": true,
		"9.9999999999999999999999999999999999999E+125": true, "12345678901234567890123456789012345678": true,
		"1234567890123456789012345678901234567800000": true, "0.00012345678901234567890123456789012345678": true,
		"1e400": false, "1E126": false, "1E-131": false, "0.1E-130": false, "-1e126": false,
		"123456789012345678901234567890123456789": false, "1.23456789012345678901234567890123456789": false,
		"abc": false, "": false, "1e": false, "0e99999999999999999999": false, "0e-99999999999999999999": false,
		"0e999999": true, "0e2147483648": false, "0e-2147483648": false, "0.0e999999999999": false,
	} {
		if err := Check(s); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want ok %v", s, err, ok)
		}
	}
}

// TestShort: a long number in an error keeps its end and says it was cut.
func TestShort(t *testing.T) {
	if got := Short("1e-131"); got != "1e-131" {
		t.Errorf("Short of a short number = %q", got)
	}
	long := "0." + strings.Repeat("0", 130) + "1"
	if got, want := Short(long), "0."+strings.Repeat("0", 38)+"…"+strings.Repeat("0", 11)+"1 (133 characters)"; got != want {
		t.Errorf("Short = %q, want %q", got, want)
	}
}
