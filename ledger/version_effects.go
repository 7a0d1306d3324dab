package ledger

import (
	"bytes"
	"maps"
	"math/big"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AppliedTo is item as the effects' changes of the item itself leave it (set, add, remove), as
// DynamoDB will store it: the content whose version a versioned ledger records when the effects
// commit with the completion, so that the item's own change is not taken for a new version. item
// is not modified. Effects with an error leave item as it is.
func (e *Effects) AppliedTo(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if e == nil || e.err != nil || len(e.item) == 0 {
		return item
	}
	out := maps.Clone(item)
	for _, c := range e.item {
		switch c.kind {
		case changeSet:
			out[c.name] = c.value
		case changeRemove:
			delete(out, c.name)
		case changeAdd:
			out[c.name] = added(out[c.name], c.value)
		}
	}
	return out
}

// added is old + v as DynamoDB's ADD computes it: a sum of numbers, a union of sets, v alone when
// old is missing (or of another type: the write would fail, and nothing is recorded then).
func added(old, v types.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *types.AttributeValueMemberN:
		o, ok := old.(*types.AttributeValueMemberN)
		if !ok {
			return v
		}
		a, okA := new(big.Rat).SetString(o.Value)
		b, okB := new(big.Rat).SetString(x.Value)
		if !okA || !okB {
			return v
		}
		return &types.AttributeValueMemberN{Value: exactDecimal(a.Add(a, b))}
	case *types.AttributeValueMemberSS:
		if o, ok := old.(*types.AttributeValueMemberSS); ok {
			return &types.AttributeValueMemberSS{Value: union(o.Value, x.Value)}
		}
	case *types.AttributeValueMemberNS:
		if o, ok := old.(*types.AttributeValueMemberNS); ok {
			return &types.AttributeValueMemberNS{Value: unionNumbers(o.Value, x.Value)}
		}
	case *types.AttributeValueMemberBS:
		if o, ok := old.(*types.AttributeValueMemberBS); ok {
			return &types.AttributeValueMemberBS{Value: unionBytes(o.Value, x.Value)}
		}
	}
	return v
}

func unionBytes(a, b [][]byte) [][]byte {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.ContainsFunc(out, func(e []byte) bool { return bytes.Equal(e, s) }) {
			out = append(out, s)
		}
	}
	return out
}

// exactDecimal is r, a sum of decimals, written out exactly (its denominator divides a power of
// ten), in ddbnum.Canonical's form.
func exactDecimal(r *big.Rat) string {
	ten, p := big.NewInt(10), big.NewInt(1)
	for k := 0; k <= 400; k++ {
		if new(big.Int).Mod(p, r.Denom()).Sign() == 0 {
			return numberForm(r.FloatString(k))
		}
		p.Mul(p, ten)
	}
	return numberForm(r.FloatString(400))
}

// unionNumbers is a union of number sets whose members are compared as numbers ("1.0" is 1).
func unionNumbers(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.ContainsFunc(out, func(e string) bool { return numberForm(e) == numberForm(s) }) {
			out = append(out, s)
		}
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
