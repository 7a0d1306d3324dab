package ledger

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// Adversarial review of versions (follow mode): the version a completion with effects records is
// ContentVersion(Effects.AppliedTo(attrs)); it must be the version of the item as DynamoDB stores
// it after the effects, or the completion's own write is taken for a new version by the stream
// (handled again; with an ADD, for ever).

type versionReviewCase struct {
	name    string
	attrs   map[string]types.AttributeValue // besides the key
	changes []Change
}

func vrN(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }

// versionReviewHolds are cases AppliedTo gets right (kept as a guard).
var versionReviewHolds = []versionReviewCase{
	{"add decimals", map[string]types.AttributeValue{"x": vrN("0.1")}, []Change{Add("x", vrN("0.2"))}},
	{"add to a missing number", nil, []Change{Add("x", vrN("1.50"))}},
	{"add negative to zero", map[string]types.AttributeValue{"x": vrN("5")}, []Change{Add("x", vrN("-5"))}},
	{"add string set", map[string]types.AttributeValue{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}},
		[]Change{Add("ss", &types.AttributeValueMemberSS{Value: []string{"b", "c"}})}},
	{"add to a missing string set", nil, []Change{Add("ss", &types.AttributeValueMemberSS{Value: []string{"z", "a"}})}},
	{"set nested map and list", nil, []Change{Set("m", map[string]any{"a": 1.5, "b": []any{"x", 2, map[string]any{"c": true}}, "n": nil})}},
	{"set number spelled with exponent", nil, []Change{Set("x", vrN("1.50E2"))}},
	{"set number set spelled oddly", nil, []Change{Set("ns", &types.AttributeValueMemberNS{Value: []string{"1.50", "2E1"}})}},
	{"remove a missing attribute", map[string]types.AttributeValue{"x": vrN("1")}, []Change{Remove("nope"), Set("y", "v")}},
	{"add 38 significant digits", map[string]types.AttributeValue{"x": vrN("1234567890123456789012345678901234567")}, []Change{Add("x", vrN("0.1"))}},
}

// versionReviewHoles are cases where AppliedTo differs from what DynamoDB stores.
var versionReviewHoles = []versionReviewCase{
	// added() rounds a sum to 40 decimal places (FloatString(40)): 1E-45 + 1E-45 becomes "0", while
	// DynamoDB stores 2E-45 (numbers go down to 1E-130).
	{"add tiny decimal", map[string]types.AttributeValue{"x": vrN("1E-45")}, []Change{Add("x", vrN("1E-45"))}},
	// added() has no case for binary sets: the union is taken for the added members alone.
	{"add to binary set", map[string]types.AttributeValue{"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}}}},
		[]Change{Add("bs", &types.AttributeValueMemberBS{Value: [][]byte{{2}}})}},
	// union() compares number set members as strings: "1.0" is taken for a new member of {1}.
	{"add number set member spelled differently", map[string]types.AttributeValue{"ns": &types.AttributeValueMemberNS{Value: []string{"1"}}},
		[]Change{Add("ns", &types.AttributeValueMemberNS{Value: []string{"1.0", "2"}})}},
}

// TestVersionReviewEffectsVersionIsStoredContent: a completion with item effects records the
// version of the content DynamoDB stores after them (both ledgers).
func TestVersionReviewEffectsVersionIsStoredContent(t *testing.T) {
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			t.Run("holds", func(t *testing.T) { checkVersionReviewCases(t, kind, versionReviewHolds) })
			t.Run("holes", func(t *testing.T) { checkVersionReviewCases(t, kind, versionReviewHoles) })
		})
	}
}

func checkVersionReviewCases(t *testing.T, kind string, cases []versionReviewCase) {
	ctx := context.Background()
	l, db, source := versionedLedger(t, kind, "job-vr")
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := lcKey(i)
			item := map[string]types.AttributeValue{"id": k["id"]}
			for n, v := range c.attrs {
				item[n] = v
			}
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(source), Item: item})
			require.NoError(t, err)
			before := vrReadItem(t, db, source, k)
			r := lcReq(k, "w", 0, 1, lcT0)
			r.Version = l.ContentVersion(before)
			o := lcClaim(t, l, r)
			require.True(t, o.Claimed)
			eff := (&Effects{}).Item(c.changes...)
			cl := o.Claim
			cl.Version = l.ContentVersion(eff.AppliedTo(before)) // what the worker records (process.go)
			require.NoError(t, l.CompleteWith(ctx, cl, lcT0, eff))
			after := vrReadItem(t, db, source, k)
			st := lcState(t, l, k)
			require.Equal(t, StatusDone, st.Status)
			require.Equal(t, l.ContentVersion(after), st.Version,
				"the recorded version is not the stored content's: the completion's own write is a new version for the stream\nAppliedTo: %s\nstored:    %s",
				vrShow(l, eff.AppliedTo(before)), vrShow(l, after))
		})
	}
}

func vrReadItem(t *testing.T, db *dynamodb.Client, table string, k Key) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.NotEmpty(t, out.Item)
	return out.Item
}

// vrShow prints the content attributes of item (not the inline ledger's).
func vrShow(l Ledger, item map[string]types.AttributeValue) string {
	out := map[string]string{}
	for n, v := range item {
		if len(n) > 3 && n[:3] == "dp_" {
			continue
		}
		switch x := v.(type) {
		case *types.AttributeValueMemberN:
			out[n] = "N:" + x.Value
		case *types.AttributeValueMemberNS:
			out[n] = fmt.Sprint("NS:", x.Value)
		case *types.AttributeValueMemberBS:
			out[n] = fmt.Sprint("BS:", x.Value)
		case *types.AttributeValueMemberS:
			out[n] = "S:" + x.Value
		default:
			out[n] = fmt.Sprintf("%T", v)
		}
	}
	return fmt.Sprint(out)
}
