package ddbnum

import (
	"fmt"
	"strings"
)

// maxCanonicalExp bounds the magnitude Canonical writes out (its leading digit's exponent):
// DynamoDB's range is 1e-130 .. 1e126, so a number past it is no DynamoDB number, and writing it
// out would take its exponent in zeros.
const maxCanonicalExp = 1000

// Canonical writes a DynamoDB number in one form per value: plain decimal, no exponent, no leading
// or trailing zeros, no "+", "-0" as "0". The form is also a JSON number. Surrounding space is
// ignored. Text that is not a number is an error, and so is one whose magnitude is past 1e±1000
// (unless its exponent as written is within ±1000): every number Check passes has a form.
func Canonical(s string) (string, error) {
	x, ok := Parse(strings.TrimSpace(s))
	if !ok {
		return "", fmt.Errorf("invalid number %q", s)
	}
	digits := strings.TrimLeft(x.Int+x.Frac, "0")
	if digits == "" {
		return "0", nil
	}
	exp := x.Exp - int64(len(x.Frac)) // value = digits * 10^exp
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	written := x.Exp <= maxCanonicalExp && x.Exp >= -maxCanonicalExp
	if lead := exp + int64(len(digits)) - 1; !written && (lead > maxCanonicalExp || lead < -maxCanonicalExp) {
		return "", fmt.Errorf("invalid number %q: magnitude past 1e±%d", s, maxCanonicalExp)
	}
	return decimal(x.Neg, digits, int(exp)), nil
}

// decimal writes digits * 10^exp (digits without leading or trailing zeros) in plain decimal.
func decimal(neg bool, digits string, exp int) string {
	var out string
	switch {
	case exp >= 0:
		out = digits + strings.Repeat("0", exp)
	case -exp < len(digits):
		out = digits[:len(digits)+exp] + "." + digits[len(digits)+exp:]
	default:
		out = "0." + strings.Repeat("0", -exp-len(digits)) + digits
	}
	if neg {
		out = "-" + out
	}
	return out
}
