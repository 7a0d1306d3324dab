package ledger

import (
	"context"
	"maps"
	"math/big"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/capacity"
)

// Footprint is what an item's state row weighs (bytes, by DynamoDB's rules) before and after each
// write that finishes the item at its first attempt. DynamoDB bills a write by the larger of the
// row before and after it, so a capacity estimate (work --dry-run) needs these sizes: the inline
// ledger's state adds 50-200 bytes to the item, which moves an item near a KB boundary into the
// next write unit.
type Footprint struct {
	Before       int // the row as given: the item as scanned (inline), the row as stored (table; 0: none)
	Claimed      int // after its claim
	Done         int // after the claim's completion
	CompleteOnly int // after a complete-only write instead (no claim before it)
}

// Footprint applies req's claim, the claim's completion and, instead of both, req's complete-only
// write to the state row of item, as the ledger's transitions write them, and returns the row's
// sizes. The row is the item itself for the inline ledger; for the table ledger it is row, the
// item's row as stored (StateRow; nil when it has none). req needs the values a worker sends
// (Owner, Slot, Token, Scope, Now, Until); an empty ID is made up, and a versioned ledger records
// item's content version.
func (l ops) Footprint(item, row map[string]types.AttributeValue, req ClaimRequest) (Footprint, error) {
	c := l.core
	req.Key = pick(item, c.keyAttrs)
	if req.ID == "" {
		req.ID = newID()
	}
	if c.versioned && req.Version == "" {
		req.Version = l.ContentVersion(item)
	}
	before := item
	if c.source != "" { // the table ledger: its row, or the key a first write creates it with
		before = row
		if row == nil {
			rk, err := c.row.key(req.Key)
			if err != nil {
				return Footprint{}, err
			}
			before = rk
		}
	}
	vals := c.requestVals(req)
	claimed := c.ops[OpClaim].upd.apply(before, c.names, vals)
	done := c.ops[OpComplete].upd.apply(claimed, c.names, fenceVals(Claim{ID: req.ID, Version: req.Version}).with(vNow, vals[vNow]))
	completeOnly := c.ops[OpCompleteOnly].upd.apply(before, c.names, vals)
	if c.source != "" && row == nil {
		before = nil
	}
	return Footprint{Before: capacity.ItemSize(before), Claimed: capacity.ItemSize(claimed),
		Done: capacity.ItemSize(done), CompleteOnly: capacity.ItemSize(completeOnly)}, nil
}

// StateRow reads the state row of the item key whole (consistent): the item's state and the row
// as stored, nil when it has none (for Footprint, which sizes writes by the whole row).
func (l *Table) StateRow(ctx context.Context, key Key) (ItemState, map[string]types.AttributeValue, error) {
	rowKey, err := l.core.row.key(key)
	if err != nil {
		return ItemState{}, nil, err
	}
	row, err := l.core.getRow(ctx, "read state", rowKey)
	if err != nil {
		return ItemState{}, nil, err
	}
	if len(row) == 0 {
		row = nil
	}
	return l.core.decodeState(row), row, nil
}

// apply returns a copy of item with u applied as DynamoDB applies it: SET (if_not_exists keeps
// the attribute it names when present), ADD to a number (a missing one counts as 0), REMOVE.
func (u update) apply(item map[string]types.AttributeValue, names map[attr]string, vals values) map[string]types.AttributeValue {
	out := maps.Clone(item)
	if out == nil {
		out = map[string]types.AttributeValue{}
	}
	for _, s := range u.set {
		v := vals.get(s.v)
		if from, ok := item[names[s.from]]; s.from != "" && ok {
			v = from
		}
		out[names[s.a]] = v
	}
	for _, a := range u.add {
		out[names[a.a]] = addNumbers(out[names[a.a]], vals.get(a.v))
	}
	for _, a := range u.remove {
		delete(out, names[a])
	}
	return out
}

// addNumbers is x + y of two number values; a missing (or non-number) x counts as 0.
func addNumbers(x, y types.AttributeValue) types.AttributeValue {
	sum := new(big.Rat)
	for _, v := range []types.AttributeValue{x, y} {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			if r, ok := new(big.Rat).SetString(n.Value); ok {
				sum.Add(sum, r)
			}
		}
	}
	return &types.AttributeValueMemberN{Value: sum.RatString()}
}
