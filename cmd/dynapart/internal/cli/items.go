package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/ddbnum"
)

// plainValue turns an attribute value into plain JSON data: S as a string, N as a JSON number with
// all its digits, B as base64, sets as arrays, L and M recursively, NULL as null.
func plainValue(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return json.Number(v.Value)
	case *types.AttributeValueMemberB:
		return base64.StdEncoding.EncodeToString(v.Value)
	case *types.AttributeValueMemberBOOL:
		return v.Value
	case *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberSS:
		return v.Value
	case *types.AttributeValueMemberNS:
		out := make([]json.Number, len(v.Value))
		for i, n := range v.Value {
			out[i] = json.Number(n)
		}
		return out
	case *types.AttributeValueMemberBS:
		out := make([]string, len(v.Value))
		for i, b := range v.Value {
			out[i] = base64.StdEncoding.EncodeToString(b)
		}
		return out
	case *types.AttributeValueMemberL:
		out := make([]any, len(v.Value))
		for i, e := range v.Value {
			out[i] = plainValue(e)
		}
		return out
	case *types.AttributeValueMemberM:
		return PlainMap(v.Value)
	}
	return nil
}

// PlainMap is an item as plain Go values (see plainValue).
func PlainMap(m map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = plainValue(v)
	}
	return out
}

// PlainJSON encodes an item or key as a plain JSON object (keys sorted, HTML not escaped).
func PlainJSON(m map[string]types.AttributeValue) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(PlainMap(m)); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// FromPlain is plain JSON data (decoded with UseNumber) as an attribute value: a string is S, a
// number N, true/false BOOL, null NULL, an array L, an object M. A number DynamoDB cannot store
// (over 38 significant digits, or out of its range) is an error that says so.
func FromPlain(v any) (types.AttributeValue, error) {
	switch v := v.(type) {
	case string:
		return &types.AttributeValueMemberS{Value: v}, nil
	case json.Number:
		if err := ddbnum.Check(v.String()); err != nil {
			return nil, fmt.Errorf("number %s: %w", ddbnum.Short(v.String()), err)
		}
		return &types.AttributeValueMemberN{Value: v.String()}, nil
	case float64:
		return &types.AttributeValueMemberN{Value: strconv.FormatFloat(v, 'f', -1, 64)}, nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}, nil
	case nil:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case []any:
		l := make([]types.AttributeValue, len(v))
		for i, e := range v {
			av, err := FromPlain(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case map[string]any:
		m := make(map[string]types.AttributeValue, len(v))
		for k, e := range v {
			av, err := FromPlain(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("a %T is not a JSON value", v)
}
