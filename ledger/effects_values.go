package ledger

import (
	"fmt"
	"reflect"
	"strconv"

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
		if nilPointer(x) {
			return &types.AttributeValueMemberNULL{Value: true}, nil // a failed type assertion's
		}
		return x, nil
	case string, bool, int, int64, float64, []byte: // the common values, on every item's path
		return attributevalue.Marshal(v)
	}
	v = lift(v)
	if where, ok := nestedAttributeValue(reflect.ValueOf(v), 0, map[uintptr]bool{}); ok {
		return nil, fmt.Errorf("a types.AttributeValue in the value%s, which attributevalue.Marshal stores as a struct: "+
			"give it alone, or in a map[string]any or []any", where)
	}
	av, err := attributevalue.Marshal(v)
	if m, ok := av.(*types.AttributeValueMemberM); ok && len(m.Value) == 0 && opaque(v) {
		return nil, fmt.Errorf("a %T has no exported fields: attributevalue.Marshal stores it as an empty map "+
			"(for a big number, give a types.AttributeValueMemberN of its digits)", v)
	}
	return av, err
}

// opaque reports a struct (or a pointer to one) without exported fields that does not marshal
// itself, such as a *big.Int.
func opaque(v any) bool {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || marshals(t) {
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

// given is a types.AttributeValue taken as it is by attributevalue.Marshal (a Marshaler).
type given struct{ av types.AttributeValue }

func (g given) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) { return g.av, nil }

// lift is v with the attribute values it holds in map[string]any and []any (at any depth) marked
// to be taken as they are; a map or slice of attribute values is one attribute value.
func lift(v any) any {
	switch x := v.(type) {
	case types.AttributeValue:
		if nilPointer(x) {
			return nil // NULL, as Marshal stores a nil
		}
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
	marshalerType      = reflect.TypeFor[attributevalue.Marshaler]()
)

// nilPointer reports a typed nil attribute value (s, _ := it.Attrs["x"].(*types.AttributeValueMemberS)).
func nilPointer(av types.AttributeValue) bool {
	v := reflect.ValueOf(av)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// marshals reports a type whose values marshal themselves (attributevalue.Marshaler, given
// included): Marshal calls the method and looks no further.
func marshals(t reflect.Type) bool {
	return t.Kind() != reflect.Interface && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType))
}

// nestedAttributeValue reports whether v holds a types.AttributeValue that lift did not mark (in a
// struct's field, a typed map's or slice's element) where Marshal would reach it, and where, as a
// path from v (built only for the one found). seen holds the pointers and maps met, so that a value
// referred to twice, or a cycle, is looked at once.
func nestedAttributeValue(v reflect.Value, depth int, seen map[uintptr]bool) (string, bool) {
	if !v.IsValid() || depth > maxNesting || marshals(v.Type()) {
		return "", false
	}
	if depth > 0 && v.Kind() != reflect.Interface && v.Type().Implements(attributeValueType) && !v.IsZero() {
		return "", true
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Map:
		if v.IsNil() || seen[v.Pointer()] {
			return "", false
		}
		seen[v.Pointer()] = true
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return nestedAttributeValue(v.Elem(), depth+1, seen)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if (!f.IsExported() && !f.Anonymous) || f.Tag.Get("dynamodbav") == "-" {
				continue // Marshal skips it (an embedded struct's promoted fields it reads)
			}
			if w, ok := nestedAttributeValue(v.Field(i), depth+1, seen); ok {
				return "'s field " + f.Name + w, true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if w, ok := nestedAttributeValue(it.Value(), depth+1, seen); ok {
				return fmt.Sprintf("[%v]", it.Key()) + w, true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", false
		}
		for i := range v.Len() {
			if w, ok := nestedAttributeValue(v.Index(i), depth+1, seen); ok {
				return "[" + strconv.Itoa(i) + "]" + w, true
			}
		}
	}
	return "", false
}

// maxNesting bounds the search (DynamoDB stores 32 levels).
const maxNesting = 40
