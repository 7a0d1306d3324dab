package ddbnum

import (
	"fmt"
	"strings"
)

// maxCanonicalExp bounds the exponent Canonical writes out: DynamoDB's range is 1e-130 .. 1e126,
// so a number past it is no DynamoDB number, and writing it out would take its exponent in zeros.
const maxCanonicalExp = 1000

// Canonical writes a DynamoDB number in one form per value: plain decimal, no exponent, no leading
// or trailing zeros, no "+", "-0" as "0". The form is also a JSON number. Surrounding space is
// ignored; text that is not a number, or whose exponent is past 1000, is an error.
func Canonical(s string) (string, error) {
	x, ok := Parse(strings.TrimSpace(s))
	if !ok || x.Exp > maxCanonicalExp || x.Exp < -maxCanonicalExp {
		return "", fmt.Errorf("invalid number %q", s)
	}
	digits := x.Int + x.Frac
	exp := int(x.Exp) - len(x.Frac) // value = digits * 10^exp
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	var out string
	switch {
	case exp >= 0:
		out = digits + strings.Repeat("0", exp)
	case -exp < len(digits):
		out = digits[:len(digits)+exp] + "." + digits[len(digits)+exp:]
	default:
		out = "0." + strings.Repeat("0", -exp-len(digits)) + digits
	}
	if x.Neg {
		out = "-" + out
	}
	return out, nil
}
