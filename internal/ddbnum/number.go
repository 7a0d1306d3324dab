// Package ddbnum parses DynamoDB numbers' text, for the partition function (package scan) and the
// ledger's canonical key encoding (package ledger), which must read numbers alike, and checks it
// (Check) and writes it in one form per value (Canonical) for the CLI's keys and values.
package ddbnum

import (
	"errors"
	"fmt"
	"strings"
)

// Number is a DynamoDB number's text, parsed: the value is (the digits of Int followed by those of
// Frac) * 10^Exp, negative when Neg.
type Number struct {
	Neg       bool
	Int, Frac string
	Exp       int64
}

// maxExp bounds exponents far beyond DynamoDB's range (1e-130 .. 1e126), so parsing cannot overflow.
const maxExp = 1 << 40

// maxReadExp bounds the exponents DynamoDB reads at all: from 2^31 on (a 32-bit scale), it refuses
// the number, zero too (DynamoDB Local: 0e2147483648 is refused).
const maxReadExp = 1 << 31

// Parse parses a number's text ([+-]digits[.digits][(e|E)[+-]digits], with digits on at least
// one side of the point); ok is false when s is not one. Exponents are clamped far beyond
// DynamoDB's range, so parsing cannot overflow.
func Parse(s string) (x Number, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		x.Neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	x.Int = s[start:i]
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		x.Frac = s[start:i]
	}
	if x.Int == "" && x.Frac == "" {
		return x, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return x, false
		}
		for i < len(s) && isDigit(s[i]) {
			if x.Exp < maxExp {
				x.Exp = x.Exp*10 + int64(s[i]-'0')
			}
			i++
		}
		if eneg {
			x.Exp = -x.Exp
		}
	}
	return x, i == len(s)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Digit returns the k-th mantissa digit (Int then Frac) as a number.
func (x *Number) Digit(k int) uint64 {
	if k < len(x.Int) {
		return uint64(x.Int[k] - '0')
	}
	return uint64(x.Frac[k-len(x.Int)] - '0')
}

// Char returns the k-th mantissa digit (Int then Frac) as its character.
func (x *Number) Char(k int) byte {
	if k < len(x.Int) {
		return x.Int[k]
	}
	return x.Frac[k-len(x.Int)]
}

// maxDigits and the exponents of the leading digit bound the numbers DynamoDB stores: 38
// significant digits, magnitudes from 1E-130 to 9.9999999999999999999999999999999999999E+125.
const (
	maxDigits        = 38
	minLead, maxLead = -130, 125
)

// Check says why s is not a number DynamoDB stores (not a number's text, more than 38 significant
// digits, or a magnitude out of its range); nil when it is one. Zero is one.
func Check(s string) error {
	x, ok := Parse(s)
	if !ok {
		return errors.New("not a number")
	}
	if x.Exp >= maxReadExp || x.Exp <= -maxReadExp {
		return errors.New("an exponent too large to read (DynamoDB refuses it, even for zero)")
	}
	digits := strings.TrimLeft(x.Int+x.Frac, "0")
	if digits == "" {
		return nil
	}
	if n := len(strings.TrimRight(digits, "0")); n > maxDigits {
		return fmt.Errorf("%d significant digits: DynamoDB keeps at most %d", n, maxDigits)
	}
	if lead := x.Exp - int64(len(x.Frac)) + int64(len(digits)) - 1; lead < minLead || lead > maxLead {
		return errors.New("out of DynamoDB's range: magnitudes from 1E-130 to 9.99...E+125 (38 digits)")
	}
	return nil
}

// Short is s for an error message: as it is up to 60 bytes, else its start and end around an
// ellipsis, with its length, so that a long number cut short does not read as another one
// ("0.000…0001 (135 characters)", not "0.000").
func Short(s string) string {
	if len(s) <= 60 {
		return s
	}
	return fmt.Sprintf("%s…%s (%d characters)", s[:40], s[len(s)-12:], len(s))
}
