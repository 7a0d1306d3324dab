package ledger

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// Attribute values copied from an item into a map[string]any, a []any, or a map or slice of them
// are written as they are; attributevalue.Marshal alone stored the struct behind each
// ({"Value":"Ada"}) and the commit went through (helper-73). One it cannot reach (a struct's
// field) is refused, as is a value it would store as an empty map (a *big.Int).
func TestEffectValuesHoldingAttributeValues(t *testing.T) {
	ada := &types.AttributeValueMemberS{Value: "Ada"}
	n36 := &types.AttributeValueMemberN{Value: "36"}
	for _, c := range []struct {
		v    any
		want types.AttributeValue
	}{
		{map[string]any{"name": ada, "tags": []any{ada, "x"}}, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"name": ada, "tags": &types.AttributeValueMemberL{Value: []types.AttributeValue{ada, &types.AttributeValueMemberS{Value: "x"}}}}}},
		{map[string]types.AttributeValue{"age": n36}, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"age": n36}}},
		{[]types.AttributeValue{ada, n36}, &types.AttributeValueMemberL{Value: []types.AttributeValue{ada, n36}}},
		{[]any{map[string]any{"a": n36}}, &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": n36}}}}},
		{"plain", &types.AttributeValueMemberS{Value: "plain"}},
	} {
		ch := Set("v", c.v)
		require.NoError(t, ch.err, "%#v", c.v)
		require.Equal(t, c.want, ch.value, "%#v", c.v)
	}
	type holder struct{ Name types.AttributeValue }
	for v, want := range map[any]string{
		holder{Name: ada}:  "a types.AttributeValue in the value's field Name",
		&holder{Name: ada}: "a types.AttributeValue in the value's field Name",
		big.NewInt(7):      "a big.Int in the value has no exported fields",
	} {
		require.ErrorContains(t, Set("v", v).err, want, "%#v", v)
	}
	require.ErrorContains(t, Set("v", map[string]any{"n": big.NewInt(7)}).err, "a big.Int in the value[n] has no exported fields")
	require.NoError(t, Set("v", map[string]any{"t": time.Unix(1, 0)}).err, "a time.Time is text")
	mapOfTyped := map[string][]types.AttributeValue{"l": {ada}} // a typed container lift does not rebuild
	require.ErrorContains(t, Set("v", mapOfTyped).err, "a types.AttributeValue in the value[l][0]")

	// A put's item: a map[string]any with the key copied from the item's Key.
	m, err := marshalMap(map[string]any{"pk": &types.AttributeValueMemberS{Value: "k1"}, "name": ada, "n": 1})
	require.NoError(t, err)
	require.Equal(t, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k1"}, "name": ada,
		"n": &types.AttributeValueMemberN{Value: "1"}}, m)
	_, err = marshalMap("not an item")
	require.ErrorContains(t, err, "an item must be a map or a struct")
}

// A field of a Write that its kind does not take is refused before anything is written, not
// ignored (helper-73: an update with IfAbsent was an ordinary update; a put's Condition was dropped
// for its IfAbsent).
func TestEffectWriteFieldsOfAnotherKindRefused(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	k := lcKey(0)
	lcSeeder(t, e.raw, e.source)(k)
	cond := expression.AttributeExists(expression.Name("n"))
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}
	for w, want := range map[*Write]string{
		{Kind: WriteUpdate, Table: e.other, Key: otherKey("x"), Changes: []Change{Add("n", 1)}, IfAbsent: true}: `IfAbsent on a write of kind "update"`,
		{Kind: WritePut, Table: e.other, Item: item, IfAbsent: true, Condition: &cond}:                          "both IfAbsent and a Condition",
		{Kind: WriteDelete, Table: e.other, Key: otherKey("x"), Item: item}:                                     `an Item on a write of kind "delete"`,
		{Kind: WriteDelete, Table: e.other, Key: otherKey("x"), Changes: []Change{Add("n", 1)}}:                 `Changes on a write of kind "delete"`,
		{Kind: WritePut, Table: e.other, Item: item, Key: otherKey("x")}:                                        "a Key on a put",
	} {
		c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
		err := e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).AddWrite(*w))
		require.ErrorIs(t, err, ErrEffectRefused)
		require.ErrorContains(t, err, want)
		require.Equal(t, StatusClaimed, lcState(t, e.l, k).Status, "nothing written")
		require.NoError(t, e.l.Release(ctx, c, lcT0))
	}
	require.Empty(t, getItem(t, e.raw, e.other, otherKey("x")))
}

// Two writes to one item are refused naming both (helper-73: DynamoDB refused the commit as a
// whole, "multiple operations on one item", naming no write).
func TestEffectsSameItemTwiceRefused(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	k := lcKey(0)
	lcSeeder(t, e.raw, e.source)(k)
	c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
	eff := (&Effects{}).Update(e.other, otherKey("x"), Add("a", 1)).Update(e.other, otherKey("y"), Add("a", 1)).
		Update(e.other, otherKey("x"), Add("b", 1))
	err := e.l.CompleteWith(ctx, c, lcT0, eff)
	require.ErrorIs(t, err, ErrEffectRefused)
	require.ErrorContains(t, err, "writes[2]: writes[0] writes the same item")
	require.Equal(t, StatusClaimed, lcState(t, e.l, k).Status, "nothing written")
}
