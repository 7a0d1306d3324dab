package cli

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
			var ue *UsageError
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
