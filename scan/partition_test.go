package scan_test

import (
	"fmt"
	"hash/crc32"
	"math/big"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/scan"
)

func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func b(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }

func crcMod(text string, m int) int { return int(crc32.ChecksumIEEE([]byte(text)) % uint32(m)) }

// bigMod is the oracle for integers: math/big's Euclidean modulus is never negative.
func bigMod(t *testing.T, v string, m int) int {
	x, ok := new(big.Int).SetString(v, 10)
	require.True(t, ok, v)
	return int(new(big.Int).Mod(x, big.NewInt(int64(m))).Int64())
}

func TestPartition(t *testing.T) {
	const max38 = "99999999999999999999999999999999999999"
	cases := []struct {
		name string
		v    types.AttributeValue
		n    int
		want int
	}{
		{"small int", n("42"), 16, 10},
		{"plus sign", n("+42"), 16, 10},
		{"exponent", n("4.2e1"), 16, 10},
		{"trailing zeros", n("42.000"), 16, 10},
		{"negative exponent integer", n("4200E-2"), 16, 10},
		{"leading zeros", n("00042"), 16, 10},
		{"zero", n("0"), 7, 0},
		{"negative zero", n("-0.0"), 7, 0},
		{"negative is non-negative", n("-1"), 4, 3},
		{"negative multiple", n("-8"), 4, 0},
		{"38 digits", n("12345678901234567890123456789012345678"), 1000, 678},
		{"38 digits negative", n("-12345678901234567890123456789012345678"), 1000, 322},
		{"38 nines mod 7", n(max38), 7, bigMod(t, max38, 7)},
		{"38 nines mod big prime", n(max38), 2147483647, bigMod(t, max38, 2147483647)},
		{"38 nines mod int64 max", n(max38), 1<<63 - 1, bigMod(t, max38, 1<<63-1)},
		{"exponent beyond 38 digits", n("1e100"), 97, bigMod(t, "1"+string(make0(100)), 97)},
		{"decimal", n("1.5"), 16, crcMod("1.5", 16)},
		{"decimal trailing zero", n("1.50"), 16, crcMod("1.5", 16)},
		{"decimal exponent", n("15e-1"), 16, crcMod("1.5", 16)},
		{"decimal leading zeros", n("0001.5"), 16, crcMod("1.5", 16)},
		{"decimal no integer part", n(".25"), 16, crcMod("0.25", 16)},
		{"negative decimal", n("-0.25"), 16, crcMod("-0.25", 16)},
		{"small decimal", n("2.5E-5"), 1000, crcMod("0.000025", 1000)},
		{"malformed number", n("12abc"), 16, crcMod("12abc", 16)},
		{"string", s("user-42"), 16, crcMod("user-42", 16)},
		{"empty string", s(""), 16, 0},
		{"unicode string", s("Zürich"), 10, crcMod("Zürich", 10)},
		{"binary", b([]byte{0, 1, 2, 255}), 9, int(crc32.ChecksumIEEE([]byte{0, 1, 2, 255}) % 9)},
		{"NULL", &types.AttributeValueMemberNULL{Value: true}, 16, 0},
		{"BOOL", &types.AttributeValueMemberBOOL{Value: true}, 16, 0},
		{"list", &types.AttributeValueMemberL{Value: []types.AttributeValue{s("x")}}, 16, 0},
		{"nil", nil, 16, 0},
		{"n=1", n("5"), 1, 0},
		{"n=0", s("abc"), 0, 0},
		{"n negative", s("abc"), -3, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, scan.Partition(c.v, c.n))
		})
	}
}

func make0(k int) []byte {
	out := make([]byte, k)
	for i := range out {
		out[i] = '0'
	}
	return out
}

func TestPartitionIntegersMatchBig(t *testing.T) {
	vals := []string{"0", "1", "-1", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
		"1234567890123456789", "12345678901234567890", "-31415926535897932384626433832795028841"}
	for _, v := range vals {
		for _, m := range []int{2, 3, 7, 10, 16, 1000, 65537, 1<<32 + 15, 1<<63 - 1} {
			require.Equal(t, bigMod(t, v, m), scan.Partition(n(v), m), "%s mod %d", v, m)
		}
	}
}

func TestPartitionOf(t *testing.T) {
	it := map[string]types.AttributeValue{"id": n("10"), "grp": s("a")}
	require.Equal(t, 2, scan.PartitionOf(it, "id", 4))
	require.Equal(t, crcMod("a", 4), scan.PartitionOf(it, "grp", 4))
	require.Equal(t, 0, scan.PartitionOf(it, "missing", 4))
	require.Equal(t, 0, scan.PartitionOf(nil, "id", 4))
}

// TestPartitionBalance is the quick form of BenchmarkBalance: 100,000 keys over 16 partitions.
func TestPartitionBalance(t *testing.T) {
	uuids, ints := balanceKeys(100_000)
	require.LessOrEqual(t, maxOverMean(uuids, 16), 1.03)
	require.LessOrEqual(t, maxOverMean(ints, 16), 1.03)
}

func balanceKeys(count int) (uuids, ints []types.AttributeValue) {
	r := newRand(20240601) // fixed: the figure is reproducible
	uuids = make([]types.AttributeValue, count)
	ints = make([]types.AttributeValue, count)
	for i := range count {
		var u [16]byte
		for j := range u {
			u[j] = byte(r.Uint32())
		}
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		uuids[i] = s(fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:]))
		ints[i] = n(strconv.Itoa(i + 1))
	}
	return uuids, ints
}

func maxOverMean(keys []types.AttributeValue, parts int) float64 {
	counts := make([]int, parts)
	for _, k := range keys {
		counts[scan.Partition(k, parts)]++
	}
	return float64(maxInts(counts)) / (float64(len(keys)) / float64(parts))
}

func maxInts(v []int) int {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func ExamplePartition() {
	fmt.Println(scan.Partition(&types.AttributeValueMemberN{Value: "1234567"}, 4))
	fmt.Println(scan.Partition(&types.AttributeValueMemberN{Value: "-7"}, 4))
	fmt.Println(scan.Partition(&types.AttributeValueMemberS{Value: "user-42"}, 4))
	fmt.Println(scan.PartitionOf(map[string]types.AttributeValue{}, "id", 4))
	// Output:
	// 3
	// 1
	// 3
	// 0
}

func FuzzPartition(f *testing.F) {
	f.Add(byte('N'), "42", 16)
	f.Add(byte('N'), "-99999999999999999999999999999999999999", 7)
	f.Add(byte('N'), "1.5e-130", 3)
	f.Add(byte('N'), "9e9999999999999999999", 5)
	f.Add(byte('N'), "-.e", 2)
	f.Add(byte('S'), "héllo", 1000)
	f.Add(byte('B'), "\x00\xff", 2)
	f.Add(byte('N'), "0", 0)
	f.Add(byte('N'), "1e-99999", -1)
	f.Fuzz(func(t *testing.T, kind byte, v string, parts int) {
		var av types.AttributeValue
		switch kind % 4 {
		case 0:
			av = n(v)
		case 1:
			av = s(v)
		case 2:
			av = b([]byte(v))
		}
		p := scan.Partition(av, parts)
		if parts <= 1 {
			require.Zero(t, p)
			return
		}
		require.True(t, p >= 0 && p < parts, "partition %d of %d", p, parts)
		require.Equal(t, p, scan.Partition(av, parts), "deterministic")
		if x, ok := new(big.Int).SetString(v, 10); ok && kind%4 == 0 {
			require.Equal(t, int(new(big.Int).Mod(x, big.NewInt(int64(parts))).Int64()), p, "integer %s", v)
		}
	})
}

var sink int

func BenchmarkPartitionString(b *testing.B) {
	v := s("3f2504e0-4f89-41d3-9a0c-0305e82c3301")
	b.ReportAllocs()
	for b.Loop() {
		sink += scan.Partition(v, 16)
	}
}

func BenchmarkPartitionInt(b *testing.B) {
	for _, c := range []struct{ name, v string }{
		{"12digits", "123456789012"},
		{"38digits", "-12345678901234567890123456789012345678"},
		{"decimal", "1234.5678"},
	} {
		b.Run(c.name, func(b *testing.B) {
			v := n(c.v)
			b.ReportAllocs()
			for b.Loop() {
				sink += scan.Partition(v, 16)
			}
		})
	}
}

// BenchmarkBalance reports max/mean items per partition for 1,000,000 random UUIDs and
// 1,000,000 sequential integers over 16 partitions (1 is perfect).
func BenchmarkBalance(b *testing.B) {
	uuids, ints := balanceKeys(1_000_000)
	var u, i float64
	for b.Loop() {
		u, i = maxOverMean(uuids, 16), maxOverMean(ints, 16)
	}
	b.ReportMetric(u, "uuid-max/mean")
	b.ReportMetric(i, "int-max/mean")
}
