package partition

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// FuzzParseKeyValue: `dynapart partition` keys never panic; a rejection is a usage error and an
// accepted key has the requested type.
func FuzzParseKeyValue(f *testing.F) {
	for _, c := range [][2]string{{"S", "alice"}, {"N", "42"}, {"N", "-1.5e10"}, {"N", "1e999999999"}, {"N", "abc"},
		{"B", "AAE="}, {"B", "!!"}, {"X", "1"}, {"N", "Inf"}, {"N", "NaN"}, {"N", "0x1p-2"}, {"B", ""}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, typ, k string) {
		v, err := parseKeyValue(typ, k)
		if err != nil {
			var ue *cli.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseKeyValue(%q, %q): %v is not a usage error", typ, k, err)
			}
			return
		}
		switch v.(type) {
		case *types.AttributeValueMemberS:
			if typ != "S" {
				t.Fatalf("type %q gave S", typ)
			}
		case *types.AttributeValueMemberN:
			if typ != "N" {
				t.Fatalf("type %q gave N", typ)
			}
		case *types.AttributeValueMemberB:
			if typ != "B" {
				t.Fatalf("type %q gave B", typ)
			}
		default:
			t.Fatalf("parseKeyValue(%q, %q) = %T", typ, k, v)
		}
	})
}
