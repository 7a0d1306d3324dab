package ledger

import (
	"fmt"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file turns the Go values of effects into attribute values. attributevalue.Marshal does not
// know a types.AttributeValue held in a container: it stores the struct behind it ({"Value":
// "Ada"}), silently. Values copied from an Item's Attrs or Key are the natural ones to write, so
// those held in map[string]any, []any, map[string]types.AttributeValue or []types.AttributeValue
// are taken as they are, and one elsewhere (a struct's field, a typed map or slice) is refused.

// marshal is v as an attribute value.
func marshal(v any) (types.AttributeValue, error) {
	switch x := v.(type) {
	case types.AttributeValue:
		return x, nil
	case string, bool, int, int64, float64, []byte: // the common values, on every item's path
		return attributevalue.Marshal(v)
	}
	v = lift(v)
	if where := nestedAttributeValue(reflect.ValueOf(v), "the value", 0); where != "" {
		return nil, fmt.Errorf("a types.AttributeValue in %s, which attributevalue.Marshal stores as a struct: "+
			"give it alone, or in a map[string]any or []any", where)
	}
	av, err := attributevalue.Marshal(v)
	if m, ok := av.(*types.AttributeValueMemberM); ok && len(m.Value) == 0 && opaque(v) {
		return nil, fmt.Errorf("a %T has no exported fields: attributevalue.Marshal stores it as an empty map "+
			"(for a big number, give a types.AttributeValueMemberN of its digits)", v)
	}
	return av, err
}

// opaque reports a struct (or a pointer to one) without exported fields, such as a *big.Int.
func opaque(v any) bool {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			return false
		}
	}
	return t.NumField() > 0
}

// marshalMap is item (a map of attribute values, or what attributevalue.MarshalMap takes) as a
// put's item.
func marshalMap(item any) (map[string]types.AttributeValue, error) {
	if m, ok := item.(map[string]types.AttributeValue); ok {
		return m, nil
	}
	av, err := marshal(item)
	if err != nil {
		return nil, err
	}
	m, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		return nil, fmt.Errorf("an item must be a map or a struct, not a %T", item)
	}
	return m.Value, nil
}

// given is a types.AttributeValue taken as it is by attributevalue.Marshal.
type given struct{ av types.AttributeValue }

func (g given) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) { return g.av, nil }

// lift is v with the attribute values it holds in map[string]any and []any (at any depth) marked
// to be taken as they are; a map or slice of attribute values is one attribute value.
func lift(v any) any {
	switch x := v.(type) {
	case types.AttributeValue:
		return given{x}
	case map[string]types.AttributeValue:
		return given{&types.AttributeValueMemberM{Value: x}}
	case []types.AttributeValue:
		return given{&types.AttributeValueMemberL{Value: x}}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = lift(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = lift(e)
		}
		return l
	}
	return v
}

var (
	attributeValueType = reflect.TypeFor[types.AttributeValue]()
	givenType          = reflect.TypeFor[given]()
)

// nestedAttributeValue is where v holds a types.AttributeValue that lift did not mark (a struct's
// field, a typed map's or slice's element), "" when nowhere. at says where v is.
func nestedAttributeValue(v reflect.Value, at string, depth int) string {
	if !v.IsValid() || depth > maxNesting || v.Type() == givenType {
		return ""
	}
	if depth > 0 && v.Type().Implements(attributeValueType) && !(v.Kind() == reflect.Interface && v.IsNil()) {
		return at
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return nestedAttributeValue(v.Elem(), at, depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				if w := nestedAttributeValue(v.Field(i), fmt.Sprintf("%s's field %s", at, f.Name), depth+1); w != "" {
					return w
				}
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if w := nestedAttributeValue(it.Value(), fmt.Sprintf("%s[%v]", at, it.Key()), depth+1); w != "" {
				return w
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return ""
		}
		for i := range v.Len() {
			if w := nestedAttributeValue(v.Index(i), fmt.Sprintf("%s[%d]", at, i), depth+1); w != "" {
				return w
			}
		}
	}
	return ""
}

// maxNesting bounds the search (DynamoDB stores 32 levels).
const maxNesting = 40
