package worker

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
)

// Footprints reads the state of pending items and sizes the state rows a worker's ledger writes
// for them (see ledger.Footprint), with the ledger and claim values a worker with the same Config
// would use: work --dry-run bills the ledger's writes by these sizes, as DynamoDB does.
type Footprints struct {
	inline   *ledger.Inline // one of inline and table is set
	table    *ledger.Table  // states are read from its rows
	keyAttrs []string
	req      ClaimRequest
}

// NewFootprints returns the Footprints of a worker with cfg (as given to New: defaults are filled
// in, and an invalid field gives a *ConfigError naming it, as New does) over a source table whose
// key attributes are keyAttrs. It reads and writes nothing.
func NewFootprints(cfg Config, keyAttrs []string) (*Footprints, error) {
	d := cfg.withDefaults()
	if err := d.validate(); err != nil {
		return nil, err
	}
	l, err := ledgerOf(d, keyAttrs)
	if err != nil {
		return nil, err
	}
	inline, _ := l.(*ledger.Inline)
	table, _ := l.(*ledger.Table)
	now := d.Clock.Now()
	return &Footprints{inline: inline, table: table, keyAttrs: keyAttrs, req: ClaimRequest{
		Owner: d.Owner, Slot: max(0, d.Workers-1), Token: 1, Scope: claimScope(d), Now: now, Until: now.Add(d.ClaimTTL),
	}}, nil
}

// Of is item's state (the table ledger's: one consistent read of its row) and its footprint: its
// state row's sizes before and after each write that finishes it at its first attempt.
func (f *Footprints) Of(ctx context.Context, item map[string]types.AttributeValue) (ItemState, ledger.Footprint, error) {
	if f.inline != nil {
		st, _ := f.inline.StateOf(item)
		fp, err := f.inline.Footprint(item, nil, f.req)
		return st, fp, err
	}
	st, row, err := f.table.StateRow(ctx, keyOf(item, f.keyAttrs))
	if err != nil {
		return st, ledger.Footprint{}, err
	}
	fp, err := f.table.Footprint(item, row, f.req)
	return st, fp, err
}
