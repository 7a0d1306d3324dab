package scan

import (
	"github.com/dynapart/dynapart/internal/ddbnum"

	"hash/crc32"
	"math/bits"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Partition maps an attribute value to a partition in [0, n). It is the function every slot
// applies in filter mode, and the one `dynapart partition` prints, so it must never change:
//
//   - an integer N (in any spelling: "42", "+42", "4.2e1", "42.000") maps to value mod n, exactly,
//     for all 38 significant digits DynamoDB allows, and never negatively (-1 mod 4 = 3);
//   - a non-integer N maps to CRC-32 (IEEE) of its canonical decimal text mod n: no exponent, no
//     leading "+", no superfluous zeros ("1.50", "15e-1" and "0001.5" are all "1.5"), so one value
//     has one partition however it was written;
//   - S maps to CRC-32 of its UTF-8 bytes mod n, B to CRC-32 of its bytes mod n;
//   - a malformed N maps to CRC-32 of its raw text (DynamoDB never stores one);
//   - nil, NULL and every other type map to 0, as does everything when n <= 1.
//
// Integers take the modulo rather than a hash so that sequential ids spread perfectly evenly and
// a person can check a key's slot by hand. Partition does not allocate.
func Partition(v types.AttributeValue, n int) int {
	if n <= 1 {
		return 0
	}
	m := uint64(n)
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return int(uint64(crc32.ChecksumIEEE(stringBytes(v.Value))) % m)
	case *types.AttributeValueMemberB:
		return int(uint64(crc32.ChecksumIEEE(v.Value)) % m)
	case *types.AttributeValueMemberN:
		return partitionNumber(v.Value, m)
	}
	return 0
}

// PartitionOf is Partition of item[attr]; an item without the attribute maps to partition 0.
func PartitionOf(item map[string]types.AttributeValue, attr string, n int) int {
	return Partition(item[attr], n)
}

// stringBytes views s as bytes without copying; the bytes are only read.
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// Number is a DynamoDB number's text, parsed: the value is (the digits of Int followed by those of
// Frac) * 10^Exp, negative when Neg. The ledger's key encoding reads numbers with the same grammar.
type Number = ddbnum.Number

// ParseNumber parses a number's text ([+-]digits[.digits][(e|E)[+-]digits], with digits on at least
// one side of the point); ok is false when s is not one. Exponents are clamped far beyond
// DynamoDB's range, so parsing cannot overflow.
func ParseNumber(s string) (x Number, ok bool) { return ddbnum.Parse(s) }

func partitionNumber(s string, m uint64) int {
	x, ok := ParseNumber(s)
	if !ok {
		return int(uint64(crc32.ChecksumIEEE(stringBytes(s))) % m)
	}
	total := len(x.Int) + len(x.Frac)
	lo, hi := 0, total // significant digits are [lo, hi)
	for lo < hi && x.Digit(lo) == 0 {
		lo++
	}
	if lo == hi {
		return 0 // zero, also "-0" and "0e5"
	}
	for x.Digit(hi-1) == 0 {
		hi--
	}
	// value = digits[lo:hi] * 10^e
	e := x.Exp - int64(len(x.Frac)) + int64(total-hi)
	if e >= 0 {
		r := mulMod(digitsMod(&x, lo, hi, m), powMod(10, uint64(e), m), m)
		if x.Neg && r != 0 {
			r = m - r
		}
		return int(r)
	}
	return int(uint64(canonicalCRC(&x, lo, hi, e)) % m)
}

var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// digitsMod returns the integer spelt by the digits [lo, hi) mod m, 19 digits per 128-bit step.
func digitsMod(x *Number, lo, hi int, m uint64) uint64 {
	var r uint64
	for lo < hi {
		k := min(hi-lo, 19)
		var chunk uint64
		for j := range k {
			chunk = chunk*10 + x.Digit(lo+j)
		}
		h, l := bits.Mul64(r, pow10[k])
		l, c := bits.Add64(l, chunk, 0)
		r = bits.Rem64(h+c, l, m)
		lo += k
	}
	return r
}

func mulMod(a, b, m uint64) uint64 {
	h, l := bits.Mul64(a, b)
	return bits.Rem64(h, l, m)
}

func powMod(b, e, m uint64) uint64 {
	r := 1 % m
	b %= m
	for e > 0 {
		if e&1 == 1 {
			r = mulMod(r, b, m)
		}
		b = mulMod(b, b, m)
		e >>= 1
	}
	return r
}

// maxPlainZeros bounds the zeros written after "0." in the canonical text; smaller values (never
// stored by DynamoDB, whose smallest is 1e-130) are written in scientific notation instead.
const maxPlainZeros = 200

// canonicalCRC is the CRC-32 of the canonical text of the non-integer digits[lo:hi] * 10^e (e < 0):
// [-]INT.FRAC with no exponent and no superfluous zeros.
func canonicalCRC(x *Number, lo, hi int, e int64) uint32 {
	c := ^uint32(0)
	put := func(b byte) { c = crc32.IEEETable[byte(c)^b] ^ (c >> 8) }
	if x.Neg {
		put('-')
	}
	l := int64(hi - lo)
	point := l + e // digits before the decimal point
	switch {
	case point > 0:
		for k := lo; k < hi; k++ {
			if int64(k-lo) == point {
				put('.')
			}
			put(x.Char(k))
		}
	case -point <= maxPlainZeros:
		put('0')
		put('.')
		for range -point {
			put('0')
		}
		for k := lo; k < hi; k++ {
			put(x.Char(k))
		}
	default: // d.dddE-x
		put(x.Char(lo))
		if hi-lo > 1 {
			put('.')
			for k := lo + 1; k < hi; k++ {
				put(x.Char(k))
			}
		}
		put('E')
		put('-')
		var buf [20]byte
		i := len(buf)
		for v := uint64(-(point - 1)); ; v /= 10 {
			i--
			buf[i] = byte('0' + v%10)
			if v < 10 {
				break
			}
		}
		for _, b := range buf[i:] {
			put(b)
		}
	}
	return ^c
}
