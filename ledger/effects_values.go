package ledger

import (
	"fmt"
	"reflect"
	"strconv"
	"time"

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
	if where, t, found := unstorable(reflect.ValueOf(v), 0, map[uintptr]bool{}); found {
		if t.Implements(attributeValueType) {
			return nil, fmt.Errorf("a types.AttributeValue in the value%s, which attributevalue.Marshal stores as a struct: "+
				"give it alone, or in a map[string]any or []any", where)
		}
		return nil, fmt.Errorf("a %s in the value%s has no exported fields: attributevalue.Marshal stores it as an empty map "+
			"(for a big number, give a types.AttributeValueMemberN of its digits)", t, where)
	}
	return attributevalue.Marshal(v)
}

// opaque reports a struct type without exported fields that Marshal stores as an empty map (it
// neither marshals itself nor is a time.Time, which Marshal writes as text), such as big.Int.
func opaque(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || t == timeType || marshals(t) {
		return false
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() || f.Anonymous { // an embedded struct's fields are promoted
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
	timeType           = reflect.TypeFor[time.Time]()
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

// unstorable reports whether v holds, where Marshal would reach it, a value Marshal stores as
// something else than it is: a types.AttributeValue that lift did not mark (in a struct's field, a
// typed map's or slice's element), stored as the struct behind it, or an opaque struct (a big.Int),
// stored as an empty map. It says where, as a path from v (built only for the one found), and the
// value's type. seen holds the pointers and maps met, so that a value referred to twice, or a cycle,
// is looked at once.
func unstorable(v reflect.Value, depth int, seen map[uintptr]bool) (string, reflect.Type, bool) {
	if !v.IsValid() || depth > maxNesting || marshals(v.Type()) {
		return "", nil, false
	}
	if depth > 0 && v.Kind() != reflect.Interface && v.Type().Implements(attributeValueType) && !v.IsZero() {
		return "", v.Type(), true
	}
	if opaque(v.Type()) {
		return "", v.Type(), true
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Map:
		if v.IsNil() || seen[v.Pointer()] {
			return "", nil, false
		}
		seen[v.Pointer()] = true
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return unstorable(v.Elem(), depth+1, seen)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if (!f.IsExported() && !f.Anonymous) || f.Tag.Get("dynamodbav") == "-" {
				continue // Marshal skips it (an embedded struct's promoted fields it reads)
			}
			if w, t, ok := unstorable(v.Field(i), depth+1, seen); ok {
				return "'s field " + f.Name + w, t, true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if w, t, ok := unstorable(it.Value(), depth+1, seen); ok {
				return fmt.Sprintf("[%v]", it.Key()) + w, t, true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", nil, false
		}
		for i := range v.Len() {
			if w, t, ok := unstorable(v.Index(i), depth+1, seen); ok {
				return "[" + strconv.Itoa(i) + "]" + w, t, true
			}
		}
	}
	return "", nil, false
}

// maxNesting bounds the search (DynamoDB stores 32 levels).
const maxNesting = 40
