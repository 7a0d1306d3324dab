package ledger

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
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

// TestUnsendableAgreesWithDynamoDB: for numbers, sets and maps at the edges, unsendable refuses
// exactly the values DynamoDB refuses (each sent alone in an UpdateItem): it never refuses a value
// DynamoDB stores as given, and names every one it would refuse. One refusal is its own: a number
// written in digits other than ASCII's (DynamoDB Local reads "١٢" as 12), which DynamoDB stores as
// other text than given, so the content Effects.AppliedTo computes would not be the item's.
func TestUnsendableAgreesWithDynamoDB(t *testing.T) {
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "pk", Type: "S"})
	var values []types.AttributeValue
	for _, n := range []string{"0", "007", "-0", "+0", "+1", "1.", ".5", "-.5", "1e5", "1E+5", "1e-5", "0e2147483647",
		"0e2147483648", "1e-130", "1e-131", "9.9999999999999999999999999999999999999E+125", "1e126",
		"12345678901234567890123456789012345678", "123456789012345678901234567890123456789", "1234567890123456789012345678901234567800000",
		" 1", "1 ", "0x10", "Infinity", "NaN", "", "-", "1e", "1.2.3", "e5", "1_000"} {
		values = append(values, &types.AttributeValueMemberN{Value: n},
			&types.AttributeValueMemberNS{Value: []string{"2", n}})
	}
	values = append(values,
		&types.AttributeValueMemberNS{Value: []string{"100", "1e2"}}, &types.AttributeValueMemberNS{Value: []string{"0", "-0"}},
		&types.AttributeValueMemberNS{Value: []string{"1.50", "1.5"}}, &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		&types.AttributeValueMemberSS{Value: []string{"a", "A"}}, &types.AttributeValueMemberSS{Value: []string{"", "a"}},
		&types.AttributeValueMemberSS{Value: []string{"a", "a"}}, &types.AttributeValueMemberSS{},
		&types.AttributeValueMemberBS{Value: [][]byte{{}, {1}}}, &types.AttributeValueMemberBS{Value: [][]byte{{1}, {1}}},
		&types.AttributeValueMemberBS{}, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{" ": &types.AttributeValueMemberS{}}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"": &types.AttributeValueMemberS{}}},
		&types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberSS{Value: []string{"x", "x"}}}})
	for i, v := range values {
		_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key:                       Key{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint(i)}},
			UpdateExpression:          aws.String("SET #a = :v"),
			ExpressionAttributeNames:  map[string]string{"#a": "a"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": v}})
		_, why := unsendable(v)
		require.Equal(t, err != nil, why != "", "%#v: DynamoDB: %v; unsendable: %q", v, err, why)
	}
	for _, n := range []string{"١٢", "１"} {
		_, why := unsendable(&types.AttributeValueMemberN{Value: n})
		require.Contains(t, why, "not a number", "%q", n)
	}
}
