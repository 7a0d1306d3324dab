package ledger

// From helper-74's review of the effect values (c192fa9): values the first version refused or
// crashed on that attributevalue.Marshal takes, and one it let through.

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// rawAV marshals itself to the attribute value it holds (what a user writes to get around
// Marshal's {"Value": ...}): Marshal calls its method and never looks at the field.
type rawAV struct{ AV types.AttributeValue }

func (r rawAV) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) { return r.AV, nil }

// tagSet is a type without exported fields that marshals itself.
type tagSet struct{ m map[string]string }

func (t tagSet) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return attributevalue.Marshal(t.m)
}

// recordWithSource keeps the item it was read from in a field Marshal skips.
type recordWithSource struct {
	PK     string                          `dynamodbav:"pk"`
	Source map[string]types.AttributeValue `dynamodbav:"-"`
}

type named struct{ Name types.AttributeValue }

// embedding promotes an unexported embedded struct's field, which Marshal writes.
type embedding struct {
	named
	PK string
}

type ordinary struct {
	T   time.Time
	B   []byte
	SS  []string `dynamodbav:",stringset"`
	M   map[string]string
	P   *int
	Any any
}

// Values Marshal takes are written as it writes them: those that marshal themselves (whatever
// they hold), fields it skips, typed nils (NULL: before, the commit's UTF-8 check panicked on one
// in a map, outside any recover), and ordinary values.
func TestEffectValuesAsMarshalWritesThem(t *testing.T) {
	ada := &types.AttributeValueMemberS{Value: "Ada"}
	var typedNil *types.AttributeValueMemberS
	var nilOrdinary *ordinary
	for _, v := range []any{rawAV{ada}, map[string]any{"a": rawAV{ada}}, tagSet{}, tagSet{m: map[string]string{}},
		map[string]any{"x": typedNil}, time.Unix(1, 0), []byte("x"), ordinary{SS: []string{"a"}, M: map[string]string{"a": "b"}},
		nil, nilOrdinary, &ordinary{}, map[string]string{"a": "b"}, []string{"a"}} {
		ch := Set("v", v)
		require.NoError(t, ch.err, "%#v", v)
		want, err := attributevalue.Marshal(lift(v))
		require.NoError(t, err)
		require.Equal(t, want, ch.value, "%#v", v)
	}
	require.Equal(t, &types.AttributeValueMemberS{Value: "Ada"}, Set("v", rawAV{ada}).value)
	require.Equal(t, &types.AttributeValueMemberNULL{Value: true}, Set("v", typedNil).value)
	_, err := marshalMap(recordWithSource{PK: "k1", Source: map[string]types.AttributeValue{"pk": ada}})
	require.NoError(t, err)
	require.ErrorContains(t, Set("v", embedding{named: named{Name: ada}, PK: "x"}).err,
		"a types.AttributeValue in the value's field named's field Name")
}

// A typed nil in a commit's values is NULL, not a crash of the worker.
func TestEffectTypedNilCommitted(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	k := lcKey(0)
	lcSeeder(t, e.raw, e.source)(k)
	c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
	var s *types.AttributeValueMemberS
	require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Update(e.other, otherKey("x"), Set("v", map[string]any{"x": s}))))
	require.Equal(t, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": &types.AttributeValueMemberNULL{Value: true}}},
		getItem(t, e.raw, e.other, otherKey("x"))["v"])
}

// A nil attribute value in a put's item or key, or inside a change's map, is refused naming it
// (helper-74's typed nil, given as an attribute value: it crashed the commit's size estimate).
func TestEffectNilAttributeValueRefused(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	k := lcKey(0)
	lcSeeder(t, e.raw, e.source)(k)
	var s *types.AttributeValueMemberS
	for eff, want := range map[*Effects]string{
		(&Effects{}).Put(e.other, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}, "v": s}): `the item's attribute ["v"] is a nil attribute value`,
		(&Effects{}).Update(e.other, Key{"pk": s}, Add("n", 1)):                                                            `the key's attribute ["pk"] is a nil attribute value`,
		(&Effects{}).Update(e.other, otherKey("x"), Set("m", map[string]types.AttributeValue{"a": s})):                     `the value["a"] is a nil attribute value`,
		(&Effects{}).Item(Set("m", []types.AttributeValue{s})):                                                             `the value[0] is a nil attribute value`,
	} {
		c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
		err := e.l.CompleteWith(ctx, c, lcT0, eff)
		require.ErrorIs(t, err, ErrEffectRefused)
		require.ErrorContains(t, err, want)
		require.NoError(t, e.l.Release(ctx, c, lcT0))
	}
	require.Empty(t, getItem(t, e.raw, e.other, otherKey("x")))
}
