package ledger

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestUnsendableNullFalseNilBinary: values DynamoDB refuses naming only the placeholder (":0")
// that unsendable let through: a NULL whose Value is false ("Null attribute value types must have
// the value of true"), a B whose Value is nil (sent as no value: "Supplied AttributeValue is
// empty"), and a BS with a nil member (DynamoDB Local: a 500 InternalFailure, retried, not a
// refusal).
func TestUnsendableNullFalseNilBinary(t *testing.T) {
	for _, tc := range []struct {
		v         types.AttributeValue
		path, why string
	}{
		{&types.AttributeValueMemberNULL{}, "", nullFalseWhy},
		{&types.AttributeValueMemberB{}, "", nilBinaryWhy},
		{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": &types.AttributeValueMemberB{}}}, `["a"]`, nilBinaryWhy},
		{&types.AttributeValueMemberBS{Value: [][]byte{{1}, nil}}, "[1]", nilBinaryWhy},
		{&types.AttributeValueMemberNULL{Value: true}, "", ""},
		{&types.AttributeValueMemberB{Value: []byte{}}, "", ""},
		{&types.AttributeValueMemberBS{Value: [][]byte{{}, {1}}}, "", ""},
	} {
		path, why := unsendable(tc.v)
		require.Equal(t, tc.path, path, "%#v", tc.v)
		require.Equal(t, tc.why, why, "%#v", tc.v)
	}
}

// TestEffectsNullFalseNilBinaryRefused: through CompleteWith, such a value is refused before
// anything is sent, naming the attribute, and the attempt fails permanently (ErrEffectRefused).
func TestEffectsNullFalseNilBinaryRefused(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	lcSeeder(t, e.raw, e.source)(lcKey(0))
	c := lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
	for _, v := range []types.AttributeValue{&types.AttributeValueMemberNULL{}, &types.AttributeValueMemberB{},
		&types.AttributeValueMemberBS{Value: [][]byte{nil, {1}}}} {
		before := e.fc.Calls()
		err := e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Item(Set("v", v)))
		var ee *EffectError
		require.ErrorAs(t, err, &ee, "%#v", v)
		require.ErrorIs(t, err, ErrEffectRefused)
		require.Equal(t, "v", ee.Attr, "%v", err)
		require.Equal(t, before, e.fc.Calls(), "nothing sent: %v", err)
	}
	require.Equal(t, StatusClaimed, lcState(t, e.l, lcKey(0)).Status)
}
