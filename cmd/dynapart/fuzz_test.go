package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// FuzzParseKeySpec: --key and friends never panic; what parses is a non-empty name with S, N or B,
// and every rejection is a usage error (exit 2).
func FuzzParseKeySpec(f *testing.F) {
	for _, s := range []string{"id:S", "id", "id:n", "id:X", ":S", "", "a:b:c", "é:B", "id:", "\x00:N"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := parseKeySpec("key", v)
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseKeySpec(%q): %v is not a usage error", v, err)
			}
			return
		}
		if k.Name == "" {
			t.Fatalf("parseKeySpec(%q) = empty name", v)
		}
		switch k.Type {
		case types.ScalarAttributeTypeS, types.ScalarAttributeTypeN, types.ScalarAttributeTypeB:
		default:
			t.Fatalf("parseKeySpec(%q) type %q", v, k.Type)
		}
		if !strings.HasPrefix(v, k.Name) {
			t.Fatalf("parseKeySpec(%q) name %q", v, k.Name)
		}
	})
}

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
			var ue *usageError
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
