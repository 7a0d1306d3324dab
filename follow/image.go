package follow

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Image is a stream record's image (or keys) as DynamoDB's own attribute values, the type the
// ledger and handlers use: the two SDK packages declare the same values as different types.
func Image(img map[string]stypes.AttributeValue) map[string]types.AttributeValue {
	if img == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		out[k] = value(v)
	}
	return out
}

// value converts one attribute value; nil for a type this SDK does not know.
func value(v stypes.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *stypes.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: x.Value}
	case *stypes.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: x.Value}
	case *stypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: x.Value}
	case *stypes.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: x.Value}
	case *stypes.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: x.Value}
	case *stypes.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: x.Value}
	case *stypes.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: x.Value}
	case *stypes.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: x.Value}
	case *stypes.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = value(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *stypes.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: Image(x.Value)}
	}
	return nil
}
