package ledger

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestUnsendable: a value no write can carry is found at any depth, with its path and why; the
// values DynamoDB stores pass.
func TestUnsendable(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	m := func(kv ...any) types.AttributeValue {
		out := map[string]types.AttributeValue{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return &types.AttributeValueMemberM{Value: out}
	}
	l := func(vs ...types.AttributeValue) types.AttributeValue { return &types.AttributeValueMemberL{Value: vs} }
	var typedNil *types.AttributeValueMemberS
	for _, tc := range []struct {
		v         types.AttributeValue
		path, why string
	}{
		{s(""), "", ""},
		{n("+1.5e3"), "", ""},
		{m(), "", ""},
		{l(), "", ""},
		{&types.AttributeValueMemberNS{Value: []string{"1", "2"}}, "", ""},
		{&types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}}, "", ""},
		{typedNil, "", nilWhy},
		{l(s("a"), m("k", typedNil)), `[1]["k"]`, nilWhy},
		{m("a", m("", s("x"))), `["a"][""]`, emptyNameWhy},
		{n("abc"), "", `is the number "abc", which DynamoDB does not store: not a number`},
		{n(" 1"), "", `is the number " 1", which DynamoDB does not store: not a number`},
		{l(m("x", n("1e400"))), `[0]["x"]`, `is the number "1e400", which DynamoDB does not store: out of DynamoDB's range`},
		{&types.AttributeValueMemberSS{}, "", emptySetWhy},
		{&types.AttributeValueMemberSS{Value: []string{"a", "b", "a"}}, "[2]", duplicateWhy},
		{&types.AttributeValueMemberNS{Value: []string{"10", "1e1"}}, "[1]", duplicateWhy},
		{&types.AttributeValueMemberNS{Value: []string{"1", "x"}}, "[1]", `is the number "x", which DynamoDB does not store: not a number`},
		{&types.AttributeValueMemberBS{Value: [][]byte{{1}, {1}}}, "[1]", duplicateWhy},
		{m("s", &types.AttributeValueMemberBS{}), `["s"]`, emptySetWhy},
	} {
		path, why := unsendable(tc.v)
		require.Equal(t, tc.path, path, "%#v", tc.v)
		require.Contains(t, why, tc.why, "%#v", tc.v)
		if tc.why == "" {
			require.Empty(t, why, "%#v", tc.v)
		}
	}
}
